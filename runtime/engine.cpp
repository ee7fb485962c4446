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
    : model_(model), options_(std::move(options)), answers_(options_.max_in_flight),
      controller_(std::move(planner), options_.mode, options_.drift, initial) {
  for (const auto& o : options_.observers) observers_->add(o);
  for (const std::string& d : options_.absent_devices) controller_.fail_device(d);
  {
    std::lock_guard lock(submit_mu_);
    install_locked(controller_.initial_plan(), -1.0);
  }
  start_recovery();
}

Engine::Engine(const Model& model, std::shared_ptr<Planner> planner, PipelineSpec initial,
               const Characteristics& planned_for, EngineOptions options)
    : model_(model), options_(std::move(options)), answers_(options_.max_in_flight),
      controller_(std::move(planner), options_.mode, options_.drift, planned_for) {
  for (const auto& o : options_.observers) observers_->add(o);
  for (const std::string& d : options_.absent_devices) controller_.fail_device(d);
  {
    std::lock_guard lock(submit_mu_);
    install_locked(controller_.initial_plan(std::move(initial)), -1.0);
  }
  start_recovery();
}

void Engine::start_recovery() {
  recovery_ = std::make_unique<FaultRecovery>(options_.max_retries, answers_,
                                              [this](const FaultRecovery::Failed& f) { return rerun(f); });
  if (options_.replan_beside) planner_thread_ = std::thread([this] { plan_loop(); });
}

void Engine::plan_loop() {
  std::unique_lock lock(plan_mu_);
  for (;;) {
    plan_cv_.wait(lock, [this] { return plan_stop_ || plan_job_.has_value(); });
    if (plan_stop_) return;
    ReplanController::PlanJob job = std::move(*plan_job_);
    plan_job_.reset();
    planning_ = true;
    lock.unlock();
    ReplanController::solve(job);  // requests keep flowing meanwhile
    {
      std::lock_guard sl(submit_mu_);
      try {
        // pause: building the new pipeline only; no request waited for the solve.
        apply_locked(controller_.complete(std::move(job)), hw::now_s());
      } catch (const std::exception&) {
        // The new pipeline could not be built: keep serving on the current one.
      }
    }
    lock.lock();
    planning_ = false;
    plan_cv_.notify_all();
  }
}

void Engine::wait_replans() {
  std::unique_lock lock(plan_mu_);
  plan_cv_.wait(lock, [this] { return plan_stop_ || (!plan_job_ && !planning_); });
}

Engine::~Engine() {
  if (planner_thread_.joinable()) {
    {
      std::lock_guard lock(plan_mu_);
      plan_stop_ = true;
    }
    plan_cv_.notify_all();
    planner_thread_.join();
  }
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

std::vector<Observer*> Engine::observer_ptrs() const {
  std::vector<Observer*> out{energy_.get(), &controller_.stage_times()};
  const auto more = observers_->current();
  out.insert(out.end(), more->begin(), more->end());
  return out;
}

void Engine::add_observer(std::shared_ptr<Observer> observer) {
  observers_->add(std::move(observer));  // the running pipeline hears it from its next event
}

void Engine::install_locked(ReplanDecision d, double t0) {
  const double build_t0 = hw::now_s();
  PipelineOptions po;
  po.queue_capacity = options_.queue_capacity;
  po.preload_graph = last_graph_;
  po.preload_not_before_s = answers_.latest_modelled_end_s();
  po.epoch = d.record.new_epoch;
  po.observers = {energy_.get(), &controller_.stage_times()};
  po.more_observers = observers_;
  if (options_.prepare_spec) options_.prepare_spec(d.spec);
  auto p = std::make_shared<Pipeline>(model_, d.spec, po);  // beside the old one
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
  const double now = hw::now_s();
  d.record.build_s = now - build_t0;
  if (t0 >= 0) d.record.pause_s = now - t0;
  controller_.installed(d);
  for (Observer* o : observer_ptrs()) o->on_replan(d.record);
}

void Engine::apply_locked(std::optional<ReplanDecision> d, double t0) {
  if (!d) return;
  if (d->record.swapped) {
    install_locked(std::move(*d), t0);
    return;
  }
  for (Observer* o : observer_ptrs()) o->on_replan(d->record);
}

std::future<HostTensor> Engine::submit(Request request, ResponseCallback callback) {
  validate_request(model_, request);
  auto req = std::make_shared<const Request>(std::move(request));
  answers_.reserve();
  std::lock_guard sl(submit_mu_);
  if (req->graph()) last_graph_ = req->graph();
  // The controller reads the stage times of the requests answered since the last submission, then
  // this request's characteristics: a swap they cause serves this request already.
  const double t0 = hw::now_s();
  if (options_.replan_beside) {
    if (auto job = controller_.on_request_job(req->characteristics(), next_seq_)) {
      std::lock_guard lock(plan_mu_);
      plan_job_ = std::move(*job);
      plan_cv_.notify_all();
    }
  } else {
    try {
      apply_locked(controller_.on_request(req->characteristics(), next_seq_), t0);
    } catch (const std::exception&) {
      // The new pipeline could not be built: keep serving on the current one.
    }
  }
  const std::uint64_t seq = next_seq_++;
  std::future<HostTensor> fut = answers_.add(seq, req, std::move(callback));
  current_->submit(recovery_->job(seq, req));
  return fut;
}

bool Engine::try_submit(Request& request, AnswerCallback done) {
  validate_request(model_, request);
  if (!options_.replan_beside) return false;  // a re-plan on the request's path may build a pipeline
  if (!answers_.try_reserve()) return false;
  std::unique_lock sl(submit_mu_, std::try_to_lock);
  if (!sl.owns_lock() || !current_->has_room()) {
    answers_.unreserve();
    return false;
  }
  auto req = std::make_shared<const Request>(std::move(request));
  if (req->graph()) last_graph_ = req->graph();
  if (auto job = controller_.on_request_job(req->characteristics(), next_seq_)) {
    std::lock_guard lock(plan_mu_);
    plan_job_ = std::move(*job);
    plan_cv_.notify_all();
  }
  const std::uint64_t seq = next_seq_++;
  answers_.add_answered_by(seq, req, std::move(done));
  // Does not wait: has_room() under submit_mu_, which every submission holds.
  current_->submit(recovery_->job(seq, req));
  return true;
}

FaultRecovery::Rerun Engine::rerun(const FaultRecovery::Failed& f) {
  std::lock_guard sl(submit_mu_);
  if (f.first_failure) {
    controller_.fail_device(f.device);
    if (options_.failure_domain)
      for (const std::string& d : options_.failure_domain(f.device)) controller_.fail_device(d);
    try {
      const double t0 = hw::now_s();
      apply_locked(controller_.replan("fault", f.detail, SwapPolicy::always), t0);
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
  const double t0 = hw::now_s();
  install_locked(controller_.swap_to(std::move(spec), label, cause, detail), t0);
}

void Engine::set_mode(const std::string& mode) {
  (void)sched::objective_from_string(mode);  // InputError on unknown names
  std::lock_guard sl(submit_mu_);
  const std::string old = controller_.mode();
  controller_.set_mode(mode);
  try {
    const double t0 = hw::now_s();
    apply_locked(controller_.replan("mode", "mode " + old + " -> " + mode, SwapPolicy::if_different), t0);
  } catch (...) {
    controller_.set_mode(old);  // no plan for the new objective: keep serving under the old one
    throw;
  }
}

bool Engine::drain_device(const std::string& device, const std::string& cause, const std::string& detail,
                          double timeout_s) {
  {
    std::lock_guard sl(submit_mu_);
    if (controller_.drain(device)) {
      try {
        const double t0 = hw::now_s();
        apply_locked(controller_.replan(cause, detail.empty() ? "operator drained " + device : detail,
                                        SwapPolicy::if_different),
                     t0);
      } catch (...) {
        controller_.undrain(device);  // still serving on it: the current plan stands
        throw;
      }
    }
  }
  return wait_device_idle(device, timeout_s);
}

void Engine::undrain_device(const std::string& device, const std::string& cause, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  if (!controller_.undrain(device)) return;
  try {
    const double t0 = hw::now_s();
    apply_locked(controller_.replan(cause, detail.empty() ? "operator undrained " + device : detail,
                                    SwapPolicy::if_different),
                 t0);
  } catch (...) {
    controller_.drain(device);
    throw;
  }
}

bool Engine::restore_devices(const std::vector<std::string>& devices, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  bool any = false;
  for (const std::string& d : devices) {
    any = controller_.unfail_device(d) || any;
    recovery_->forget_failed(d);
  }
  if (!any) return false;
  const double t0 = hw::now_s();
  apply_locked(controller_.replan("rejoin", detail, SwapPolicy::if_different), t0);
  return true;
}

bool Engine::fail_devices(const std::vector<std::string>& devices, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  bool any = false;
  for (const std::string& d : devices) {
    if (controller_.failed(d)) continue;
    controller_.fail_device(d);
    any = true;
  }
  if (!any) return false;
  const double t0 = hw::now_s();
  apply_locked(controller_.replan("host lost", detail, SwapPolicy::if_different), t0);
  return true;
}

void Engine::replan(const std::string& cause, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  const double t0 = hw::now_s();
  apply_locked(controller_.replan(cause, detail, SwapPolicy::if_different), t0);
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
  {
    std::lock_guard sl(submit_mu_);
    controller_.set_drained(std::move(drained));
  }
  swap_to(std::move(spec), label, "rollback", detail);
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
