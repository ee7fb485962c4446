#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "hw/event.h"
#include "kernels/error.h"
#include "scheduler/plan.h"

namespace dype::rt {

namespace {
bool same_layout(const PipelineSpec& a, const PipelineSpec& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    if (a.stages[s].first != b.stages[s].first || a.stages[s].last != b.stages[s].last ||
        a.stages[s].devices != b.stages[s].devices)
      return false;
  }
  return true;
}
}  // namespace

Engine::Engine(const Model& model, std::shared_ptr<Planner> planner, const Characteristics& initial,
               EngineOptions options)
    : model_(model), planner_(std::move(planner)), options_(std::move(options)), mode_(options_.mode),
      drift_(options_.drift, initial) {
  if (!planner_) throw InputError("engine", "needs a planner");
  observers_ = options_.observers;
  PlannedPipeline p = planner_->plan(initial, mode_, left_out_locked());
  {
    std::lock_guard lock(submit_mu_);
    ReplanRecord r;
    r.cause = "initial";
    r.detail = "planned for the first characteristics, mode " + mode_;
    r.new_plan = p.mnemonic;
    r.swapped = true;
    r.cost_source = p.cost_source;
    install_locked(std::move(p.spec), p.mnemonic, r, initial);
  }
  recovery_ = std::thread([this] { recovery_loop(); });
}

Engine::Engine(const Model& model, std::shared_ptr<Planner> planner, PipelineSpec initial,
               const Characteristics& planned_for, EngineOptions options)
    : model_(model), planner_(std::move(planner)), options_(std::move(options)), mode_(options_.mode),
      drift_(options_.drift, planned_for) {
  observers_ = options_.observers;
  {
    std::lock_guard lock(submit_mu_);
    ReplanRecord r;
    r.cause = "initial";
    r.detail = "explicit pipeline";
    r.new_plan = initial.label.empty() ? describe(initial) : initial.label;
    r.swapped = true;
    const std::string label = r.new_plan;
    install_locked(std::move(initial), label, r, planned_for);
  }
  recovery_ = std::thread([this] { recovery_loop(); });
}

Engine::~Engine() {
  try {
    drain();
  } catch (...) {
  }
  {
    std::lock_guard lock(rec_mu_);
    stopping_ = true;
  }
  rec_cv_.notify_all();
  if (recovery_.joinable()) recovery_.join();
  std::lock_guard lock(submit_mu_);
  if (current_) current_->close();
  if (current_) current_->join();
  for (auto& r : retired_) r->join();
}

std::vector<Observer*> Engine::observer_ptrs() const {
  std::lock_guard lock(mu_);
  std::vector<Observer*> out;
  for (const auto& o : observers_) out.push_back(o.get());
  return out;
}

void Engine::add_observer(std::shared_ptr<Observer> observer) {
  std::lock_guard lock(mu_);
  observers_.push_back(std::move(observer));
}

void Engine::install_locked(PipelineSpec spec, const std::string& label, ReplanRecord record,
                            const Characteristics& planned_for) {
  const double t0 = hw::now_s();
  PipelineOptions po;
  po.queue_capacity = options_.queue_capacity;
  po.preload_graph = last_graph_;
  {
    std::lock_guard lock(mu_);
    po.preload_not_before_s = release_vt_;
  }
  po.epoch = epoch_ + 1;
  po.observers = observer_ptrs();
  auto p = std::make_shared<Pipeline>(model_, std::move(spec), po);  // beside the old one
  ++epoch_;
  if (current_) {
    current_->close();  // drains on its own
    retired_.push_back(current_);
  }
  record.old_epoch = current_ ? current_->epoch() : 0;
  current_ = std::move(p);
  current_label_ = label;
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->finished()) {
      (*it)->join();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  planned_for_ = planned_for;
  {
    std::lock_guard lock(drift_mu_);
    drift_.rebase(planned_for, next_seq_);
  }
  record.new_epoch = epoch_;
  record.new_plan = label;
  record.build_s = hw::now_s() - t0;
  record.at_request = next_seq_;
  record.swapped = true;
  std::vector<Observer*> obs;
  {
    std::lock_guard lock(mu_);
    if (record.cause != "initial") stats_.swaps++;
    add_record_locked(record);
    for (const auto& o : observers_) obs.push_back(o.get());
  }
  for (Observer* o : obs) o->on_replan(record);
}

std::set<std::string> Engine::left_out_locked() const {
  std::set<std::string> out = excluded_;
  out.insert(drained_.begin(), drained_.end());
  return out;
}

void Engine::replan_locked(const std::string& cause, const std::string& detail, const Characteristics& target,
                           SwapPolicy policy) {
  const double t0 = hw::now_s();
  ReplanRecord r;
  r.cause = cause;
  r.detail = detail;
  r.old_plan = current_label_;
  r.old_epoch = epoch_;
  r.at_request = next_seq_;
  PlannedPipeline p;
  try {
    p = planner_->plan(target, mode_, left_out_locked());
  } catch (const std::exception& e) {
    r.detail += std::string(" (no plan: ") + e.what() + ")";
    r.swapped = false;
    {
      std::lock_guard lock(mu_);
      add_record_locked(r);
    }
    if (policy != SwapPolicy::if_gain) throw;
    std::lock_guard lock(drift_mu_);
    drift_.rebase(target, next_seq_);
    return;
  }
  // Gain in the objective of the mode (period for perf, energy per inference otherwise).
  double old_score = sched::kInf;
  try {
    if (current_) old_score = planner_->predict_score(current_->spec(), target, mode_);
  } catch (const std::exception&) {
  }
  r.new_plan = p.mnemonic;
  r.cost_source = p.cost_source;
  r.predicted_gain = (std::isfinite(old_score) && p.score > 0) ? old_score / p.score - 1.0 : INFINITY;
  const bool differs = !current_ || !same_layout(current_->spec(), p.spec);
  bool take = false;
  switch (policy) {
    case SwapPolicy::always: take = true; break;
    case SwapPolicy::if_different: take = differs; break;
    case SwapPolicy::if_gain: take = differs && r.predicted_gain > options_.drift.min_gain; break;
  }
  if (!take) {
    r.swapped = false;
    r.pause_s = hw::now_s() - t0;
    std::vector<Observer*> obs;
    {
      std::lock_guard lock(mu_);
      add_record_locked(r);
      for (const auto& o : observers_) obs.push_back(o.get());
    }
    for (Observer* o : obs) o->on_replan(r);
    planned_for_ = target;  // later operator re-plans start from what the stream looks like now
    std::lock_guard lock(drift_mu_);
    drift_.rebase(target, next_seq_);  // the current plan stands for these characteristics
    return;
  }
  r.pause_s = 0;  // filled below
  install_locked(std::move(p.spec), p.mnemonic, r, target);
  const double pause = hw::now_s() - t0;
  std::lock_guard lock(mu_);
  records_.back().pause_s = pause;
  stats_.max_pause_s = std::max(stats_.max_pause_s, pause);
  stats_.total_pause_s += pause;
}

void Engine::submit_job_locked(std::uint64_t seq, std::shared_ptr<const Request> request) {
  double nb;
  {
    std::lock_guard lock(mu_);
    nb = release_vt_;
  }
  std::vector<double> predicted, power_w;
  for (const auto& st : current_->spec().stages) {
    predicted.push_back(st.predicted_s);
    // Execute power of the stage's devices (per device: its highest over the stage's ops).
    double w = 0.0;
    for (const hw::Device* d : st.devices) {
      double dw = 0.0;
      for (int k = st.first; k <= st.last; ++k) dw = std::max(dw, d->info().power.execute_w_for(model_.step(k).op));
      w += dw;
    }
    power_w.push_back(w);
  }
  Job job;
  job.seq = seq;
  job.request = std::move(request);
  job.not_before_s = nb;
  job.done = [this, predicted = std::move(predicted), power_w = std::move(power_w)](Completion&& c) {
    if (!c.error) {
      double joules = 0.0;
      for (std::size_t s = 0; s < power_w.size() && s < c.stage_modelled_s.size(); ++s)
        if (c.stage_modelled_s[s] > 0) joules += c.stage_modelled_s[s] * power_w[s];
      {
        std::lock_guard lock(mu_);
        stats_.modelled_energy_j += joules;
      }
      std::lock_guard lock(drift_mu_);
      for (std::size_t s = 0; s < predicted.size() && s < c.stage_modelled_s.size(); ++s)
        drift_.observe_stage_time(static_cast<int>(s), predicted[s], c.stage_modelled_s[s], c.seq);
    }
    on_complete(std::move(c));
  };
  current_->submit(std::move(job));
}

std::future<HostTensor> Engine::submit(Request request, ResponseCallback callback) {
  validate_request(model_, request);
  auto req = std::make_shared<const Request>(std::move(request));
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ < std::max<std::size_t>(1, options_.max_in_flight); });
    ++in_flight_;
  }
  std::lock_guard sl(submit_mu_);
  if (req->graph()) last_graph_ = req->graph();
  // Drift first, so a swap it causes serves this request already.
  std::optional<DriftSignal> sig;
  {
    std::lock_guard lock(drift_mu_);
    sig = drift_.observe(req->characteristics(), next_seq_);
  }
  if (sig) {
    try {
      replan_locked("drift", sig->detail, sig->target, SwapPolicy::if_gain);
    } catch (const std::exception&) {
      // Keep serving on the current plan; the record says why no swap happened.
    }
  } else if (auto why = planner_ ? planner_->take_recheck() : std::nullopt) {
    // The planner's models changed (online refinement): is the running plan still the best?
    try {
      replan_locked("model", *why, planned_for_, SwapPolicy::if_gain);
    } catch (const std::exception&) {
    }
  }
  const std::uint64_t seq = next_seq_++;
  std::future<HostTensor> fut;
  {
    std::lock_guard lock(mu_);
    Entry& e = entries_[seq];
    e.request = req;
    e.callback = std::move(callback);
    fut = e.promise.get_future();
    stats_.submitted++;
  }
  submit_job_locked(seq, req);
  return fut;
}

void Engine::on_complete(Completion&& c) {
  if (c.error && !c.failed_device.empty()) {
    bool rerun = false;
    {
      std::lock_guard lock(mu_);
      auto it = entries_.find(c.seq);
      if (it != entries_.end() && it->second.retries < options_.max_retries) {
        it->second.retries++;
        stats_.reruns++;
        rerun = true;
      }
    }
    if (rerun) {
      {
        std::lock_guard lock(rec_mu_);
        failed_.push_back(std::move(c));
      }
      rec_cv_.notify_one();
      return;
    }
  }
  std::lock_guard lock(mu_);
  auto it = entries_.find(c.seq);
  if (it == entries_.end() || it->second.ready) return;  // never answer twice
  it->second.ready = true;
  it->second.error = c.error;
  it->second.output = std::move(c.output);
  release_vt_ = std::max(release_vt_, c.modelled_end_s);
  release_ready_locked();
}

void Engine::release_ready_locked() {
  for (;;) {
    auto it = entries_.find(next_release_);
    if (it == entries_.end() || !it->second.ready) break;
    Entry e = std::move(it->second);
    entries_.erase(it);
    if (e.callback) e.callback(next_release_, e.error ? nullptr : &e.output, e.error);
    if (e.error) {
      stats_.failed++;
      e.promise.set_exception(e.error);
    } else {
      stats_.completed++;
      e.promise.set_value(std::move(e.output));
    }
    ++next_release_;
    --in_flight_;
  }
  stats_.modelled_makespan_s = release_vt_;
  cv_.notify_all();
}

void Engine::recovery_loop() {
  for (;;) {
    Completion c;
    {
      std::unique_lock lock(rec_mu_);
      rec_cv_.wait(lock, [&] { return stopping_ || !failed_.empty(); });
      if (failed_.empty()) return;
      c = std::move(failed_.front());
      failed_.pop_front();
    }
    std::lock_guard sl(submit_mu_);
    std::string why;
    if (!excluded_.count(c.failed_device)) {
      excluded_.insert(c.failed_device);
      try {
        std::rethrow_exception(c.error);
      } catch (const std::exception& e) {
        why = e.what();
      }
      {
        std::lock_guard lock(mu_);
        stats_.failed_devices.push_back(c.failed_device);
      }
      try {
        replan_locked("fault", "device " + c.failed_device + " failed (" + why +
                                   "); re-planning without it and re-running in-flight requests",
                      planned_for_, SwapPolicy::always);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu_);
        auto it = entries_.find(c.seq);
        if (it != entries_.end()) {
          it->second.ready = true;
          it->second.error = std::make_exception_ptr(
              hw::DeviceError(c.failed_device, std::string("failed and no plan is left without it: ") + e.what()));
          release_ready_locked();
        }
        continue;
      }
    }
    bool on_dead = false;
    for (const auto& st : current_->spec().stages)
      for (auto* d : st.devices) on_dead |= excluded_.count(d->name()) > 0;
    std::shared_ptr<const Request> req;
    {
      std::lock_guard lock(mu_);
      auto it = entries_.find(c.seq);
      if (it == entries_.end() || it->second.ready) continue;
      if (on_dead) {
        it->second.ready = true;
        it->second.error = std::make_exception_ptr(hw::DeviceError(c.failed_device, "failed; no pipeline without it"));
        release_ready_locked();
        continue;
      }
      req = it->second.request;
    }
    submit_job_locked(c.seq, req);
  }
}

void Engine::swap_to(PipelineSpec spec, const std::string& label, const std::string& cause,
                     const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  const double t0 = hw::now_s();
  ReplanRecord r;
  r.cause = cause;
  r.detail = detail.empty() ? "swap_to " + (spec.label.empty() ? describe(spec) : spec.label) : detail;
  r.old_plan = current_label_;
  try {
    r.predicted_gain = planner_ ? planner_->predict_period_s(current_->spec(), planned_for_) /
                                          planner_->predict_period_s(spec, planned_for_) - 1.0
                                : 0.0;
  } catch (const std::exception&) {
    r.predicted_gain = 0.0;
  }
  install_locked(std::move(spec), label, r, planned_for_);
  const double pause = hw::now_s() - t0;
  std::lock_guard lock(mu_);
  records_.back().pause_s = pause;
  stats_.max_pause_s = std::max(stats_.max_pause_s, pause);
  stats_.total_pause_s += pause;
}

void Engine::set_mode(const std::string& mode) {
  (void)sched::objective_from_string(mode);  // InputError on unknown names
  std::lock_guard sl(submit_mu_);
  const std::string old = mode_;
  mode_ = mode;
  try {
    replan_locked("mode", "mode " + old + " -> " + mode, planned_for_, SwapPolicy::if_different);
  } catch (...) {
    mode_ = old;  // no plan for the new objective: keep serving under the old one
    throw;
  }
}

namespace {
bool uses_device(const PipelineSpec& spec, const std::string& device) {
  for (const auto& st : spec.stages)
    for (const hw::Device* d : st.devices)
      if (d->name() == device) return true;
  return false;
}
}  // namespace

bool Engine::drain_device(const std::string& device, const std::string& cause, const std::string& detail,
                          double timeout_s) {
  {
    std::lock_guard sl(submit_mu_);
    if (drained_.insert(device).second) {
      try {
        replan_locked(cause, detail.empty() ? "operator drained " + device : detail, planned_for_,
                      SwapPolicy::if_different);
      } catch (...) {
        drained_.erase(device);  // still serving on it: the current plan stands
        throw;
      }
    }
  }
  return wait_device_idle(device, timeout_s);
}

void Engine::undrain_device(const std::string& device, const std::string& cause, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  if (!drained_.erase(device)) return;
  try {
    replan_locked(cause, detail.empty() ? "operator undrained " + device : detail, planned_for_,
                  SwapPolicy::if_different);
  } catch (...) {
    drained_.insert(device);
    throw;
  }
}

void Engine::replan(const std::string& cause, const std::string& detail) {
  std::lock_guard sl(submit_mu_);
  replan_locked(cause, detail, planned_for_, SwapPolicy::if_different);
}

bool Engine::wait_device_idle(const std::string& device, double timeout_s) {
  const double deadline = hw::now_s() + timeout_s;
  for (;;) {
    bool busy = false;
    {
      std::lock_guard sl(submit_mu_);
      if (current_ && uses_device(current_->spec(), device)) {
        // The current pipeline is idle on it only when nothing is in flight at all.
        std::lock_guard lock(mu_);
        busy = in_flight_ > 0;
      }
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
    drained_ = std::move(drained);
  }
  swap_to(std::move(spec), label, "rollback", detail);
}

std::set<std::string> Engine::drained_devices() const {
  std::lock_guard sl(submit_mu_);
  return drained_;
}

void Engine::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ == 0; });
}

void Engine::add_record_locked(const ReplanRecord& r) {
  records_.push_back(r);
  ++replan_counts_[{r.cause, r.swapped}];
  while (records_.size() > kMaxReplanRecords) records_.pop_front();
}

std::vector<ReplanRecord> Engine::replans() const {
  std::lock_guard lock(mu_);
  return {records_.begin(), records_.end()};
}

std::map<std::pair<std::string, bool>, std::uint64_t> Engine::replan_counts() const {
  std::lock_guard lock(mu_);
  return replan_counts_;
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard lock(mu_);
    s = stats_;
  }
  std::lock_guard sl(submit_mu_);
  s.epoch = epoch_;
  return s;
}

std::uint64_t Engine::epoch() const {
  std::lock_guard sl(submit_mu_);
  return epoch_;
}

PipelineSpec Engine::current_spec() const {
  std::lock_guard sl(submit_mu_);
  return current_->spec();
}

std::string Engine::current_label() const {
  std::lock_guard sl(submit_mu_);
  return current_label_;
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
