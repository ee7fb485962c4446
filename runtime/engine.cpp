#include "runtime/engine.h"

#include <chrono>
#include <thread>

#include "hw/event.h"
#include "common/error.h"
#include "scheduler/plan.h"

namespace dype::rt {

namespace {

bool uses_device(const PipelineSpec& spec, const std::string& device) {
  for (const auto& st : spec.stages)
    for (const hw::Device* d : st.devices)
      if (d->name() == device) return true;
  return false;
}

}  // namespace

Engine::Engine(const Model& model, std::shared_ptr<Planner> planner, const Characteristics& initial,
               EngineOptions options)
    : model_(model),
      options_(std::move(options)),
      answers_(options_.max_in_flight),
      controller_(std::move(planner), options_.mode, options_.drift, initial, outlet()) {
  for (const auto& o : options_.observers) observers_->add(o);
  for (const std::string& d : options_.absent_devices) controller_.fail_device(d);
  {
    std::lock_guard lock(submit_mu_);
    controller_.install_initial();
  }
  start_recovery();
}

Engine::Engine(const Model& model, std::shared_ptr<Planner> planner, PipelineSpec initial,
               const Characteristics& planned_for, EngineOptions options)
    : model_(model),
      options_(std::move(options)),
      answers_(options_.max_in_flight),
      controller_(std::move(planner), options_.mode, options_.drift, planned_for, outlet()) {
  for (const auto& o : options_.observers) observers_->add(o);
  for (const std::string& d : options_.absent_devices) controller_.fail_device(d);
  {
    std::lock_guard lock(submit_mu_);
    controller_.install_initial(std::move(initial));
  }
  start_recovery();
}

ReplanController::Outlet Engine::outlet() {
  return {.installer = *this,
          .lock = submit_mu_,
          .observers = observers_,
          .solve_beside = options_.replan_beside};
}

void Engine::start_recovery() {
  recovery_ = std::make_unique<FaultRecovery>(
      options_.max_retries, answers_, [this](const FaultRecovery::Failed& f) { return rerun(f); });
}

void Engine::wait_replans() {
  controller_.wait_replans();
}

Engine::~Engine() {
  controller_.stop();
  try {
    drain();
  } catch (...) {
  }
  recovery_->stop();
  std::lock_guard lock(submit_mu_);
  if (current_) current_->close();
  if (current_) current_->join();
  for (auto& r : retired_) r->join();
}

void Engine::add_observer(std::shared_ptr<Observer> observer) {
  observers_->add(std::move(observer));  // the running pipeline hears it from its next event
}

void Engine::install(PipelineSpec spec, std::uint64_t epoch) {
  PipelineOptions po;
  po.queue_capacity = options_.queue_capacity;
  po.preload_graph = last_graph_;
  po.preload_not_before_s = answers_.latest_modelled_end_s();
  po.epoch = epoch;
  po.observers = {energy_.get(), &controller_.stage_times()};
  po.more_observers = observers_;
  if (options_.prepare_spec) options_.prepare_spec(spec);
  auto p = std::make_shared<Pipeline>(model_, spec, po);  // beside the old one
  if (current_) {
    current_->close();  // drains on its own
    retired_.push_back(current_);
  }
  current_ = std::move(p);
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->finished()) {
      (*it)->join();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
}

std::future<HostTensor> Engine::submit(Request request, ResponseCallback callback) {
  validate_request(model_, request);
  const Characteristics chars = request.characteristics();  // what the controller will see
  auto req = std::make_shared<const Request>(std::move(request));
  answers_.reserve();
  std::lock_guard sl(submit_mu_);
  if (req->graph()) last_graph_ = req->graph();
  // The controller reads the stage times of the requests answered since the last submission, then
  // this request's characteristics: a swap they cause (solved here without replan_beside) serves
  // this request already.
  controller_.on_submit(chars, next_seq_);
  const std::uint64_t seq = next_seq_++;
  std::future<HostTensor> fut = answers_.add(seq, req, std::move(callback));
  current_->submit(recovery_->job(seq, req));
  return fut;
}

bool Engine::try_submit(Request& request, AnswerCallback done) {
  validate_request(model_, request);
  const Characteristics chars = request.characteristics();
  if (!options_.replan_beside) return false;  // a re-plan on the request's path may build a pipeline
  if (!answers_.try_reserve()) return false;
  std::unique_lock sl(submit_mu_, std::try_to_lock);
  if (!sl.owns_lock() || !current_->has_room()) {
    answers_.unreserve();
    return false;
  }
  auto req = std::make_shared<const Request>(std::move(request));
  if (req->graph()) last_graph_ = req->graph();
  controller_.on_submit(chars, next_seq_);  // solved beside: does not wait
  const std::uint64_t seq = next_seq_++;
  answers_.add_answered_by(seq, req, std::move(done));
  // Does not wait: has_room() under submit_mu_, which every submission holds.
  current_->submit(recovery_->job(seq, req));
  return true;
}

FaultRecovery::Rerun Engine::rerun(const FaultRecovery::Failed& f) {
  std::lock_guard sl(submit_mu_);
  if (f.first_failure) {
    std::vector<std::string> devices{f.device};
    if (options_.failure_domain)
      for (const std::string& d : options_.failure_domain(f.device)) devices.push_back(d);
    try {
      controller_.fail_over(devices, f.detail);
    } catch (const std::exception& e) {
      return {FaultRecovery::Rerun::no_plan, e.what()};
    }
  }
  for (const auto& st : current_->spec().stages)
    for (const hw::Device* d : st.devices)
      if (controller_.failed(d->name())) return {FaultRecovery::Rerun::on_failed_device, ""};
  if (!f.request) return {FaultRecovery::Rerun::not_pending, ""};
  current_->submit(recovery_->job(f.seq, f.request));
  return {FaultRecovery::Rerun::submitted, ""};
}

void Engine::swap_to(PipelineSpec spec, const std::string& label, const std::string& cause,
                     const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  controller_.swap_to(std::move(spec), label, cause, detail);
}

void Engine::set_mode(const std::string& mode) {
  (void)sched::objective_from_string(mode);  // InputError on unknown names
  std::lock_guard sl(submit_mu_);
  controller_.set_mode(mode);
}

bool Engine::drain_device(const std::string& device, const std::string& cause, const std::string& detail,
                          double timeout_s) {
  {
    std::lock_guard sl(submit_mu_);
    controller_.drain(device, cause, detail);
  }
  return wait_device_idle(device, timeout_s);
}

void Engine::undrain_device(const std::string& device, const std::string& cause, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  controller_.undrain(device, cause, detail);
}

bool Engine::restore_devices(const std::vector<std::string>& devices, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  for (const std::string& d : devices) recovery_->forget_failed(d);
  return controller_.restore_devices(devices, detail);
}

bool Engine::fail_devices(const std::vector<std::string>& devices, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  return controller_.fail_devices(devices, detail);
}

void Engine::replan(const std::string& cause, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  controller_.replan(cause, detail, SwapPolicy::if_different);
}

bool Engine::wait_device_idle(const std::string& device, double timeout_s) {
  const double deadline = hw::now_s() + timeout_s;
  for (;;) {
    bool busy = false;
    {
      std::lock_guard sl(submit_mu_);
      // The current pipeline is idle on it only when nothing is in flight at all.
      if (current_ && uses_device(current_->spec(), device)) busy = answers_.in_flight() > 0;
      for (const auto& r : retired_) busy = busy || (uses_device(r->spec(), device) && !r->finished());
    }
    if (!busy) return true;
    if (hw::now_s() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Engine::restore(PipelineSpec spec, const std::string& label, std::set<std::string> drained,
                     const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  controller_.restore(std::move(spec), label, std::move(drained), detail);
}

std::set<std::string> Engine::drained_devices() const {
  std::lock_guard sl(submit_mu_);
  return controller_.drained();
}

void Engine::drain() {
  // A re-plan those requests started lands first, so a drained engine is quiet.
  wait_replans();
  answers_.wait_all();
}

std::vector<ReplanRecord> Engine::replans() const {
  std::lock_guard sl(submit_mu_);
  return {controller_.records().begin(), controller_.records().end()};
}

std::map<std::pair<std::string, bool>, std::uint64_t> Engine::replan_counts() const {
  std::lock_guard sl(submit_mu_);
  return controller_.counts();
}

EngineStats Engine::stats() const {
  EngineStats s;
  const ReorderBuffer::Counters answered = answers_.counters();
  s.submitted = answered.submitted;
  s.completed = answered.completed;
  s.failed = answered.failed;
  s.cancelled = answered.cancelled;
  s.modelled_makespan_s = answers_.latest_modelled_end_s();
  s.reruns = recovery_->reruns();
  s.failed_devices = recovery_->failed_devices();
  s.modelled_energy_j = energy_->modelled_energy_j();
  std::lock_guard sl(submit_mu_);
  // Those left out with a failed one (EngineOptions::failure_domain: the rest of its host).
  for (const std::string& d : controller_.failed_devices())
    if (std::find(s.failed_devices.begin(), s.failed_devices.end(), d) == s.failed_devices.end()) s.failed_devices.push_back(d);
  s.epoch = controller_.epoch();
  s.swaps = controller_.swaps().count;
  s.max_pause_s = controller_.swaps().max_pause_s;
  s.total_pause_s = controller_.swaps().total_pause_s;
  return s;
}

std::uint64_t Engine::epoch() const {
  std::lock_guard sl(submit_mu_);
  return controller_.epoch();
}

PipelineSpec Engine::current_spec() const {
  std::lock_guard sl(submit_mu_);
  return current_->spec();
}

std::string Engine::current_label() const {
  std::lock_guard sl(submit_mu_);
  return controller_.label();
}

Engine::PlanningState Engine::planning_state() const {
  std::lock_guard sl(submit_mu_);
  return {controller_.planned_for(), controller_.mode(), controller_.left_out_devices()};
}

DriftWatch Engine::drift_watch() const {
  std::lock_guard sl(submit_mu_);
  return controller_.drift_watch();
}

std::vector<StageStats> Engine::stage_stats() const {
  std::shared_ptr<Pipeline> p;
  {
    std::lock_guard sl(submit_mu_);
    p = current_;
  }
  return p->stats();
}

}  // namespace dype::rt
