#include "runtime/planning/replan_controller.h"

#include <algorithm>
#include <cmath>

#include "hw/event.h"
#include "common/error.h"
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

ReplanController::ReplanController(std::shared_ptr<Planner> planner, std::string mode,
                                   DriftOptions drift, Characteristics planned_for, Outlet outlet)
    : planner_(std::move(planner)),
      outlet_(std::move(outlet)),
      mode_(std::move(mode)),
      drift_(drift, planned_for),
      planned_for_(planned_for) {
  if (outlet_.solve_beside) planner_thread_ = std::thread([this] { plan_loop(); });
}

ReplanController::~ReplanController() {
  stop();
}

void ReplanController::stop() {
  if (!planner_thread_.joinable()) return;
  {
    std::lock_guard lock(jobs_mu_);
    stopping_ = true;
  }
  jobs_cv_.notify_all();
  planner_thread_.join();
}

void ReplanController::wait_replans() {
  std::unique_lock lock(jobs_mu_);
  jobs_cv_.wait(lock, [this] { return stopping_ || (!queued_ && !solving_); });
}

void ReplanController::plan_loop() {
  std::unique_lock lock(jobs_mu_);
  for (;;) {
    jobs_cv_.wait(lock, [this] { return stopping_ || queued_.has_value(); });
    if (stopping_) return;
    PlanJob job = std::move(*queued_);
    queued_.reset();
    solving_ = true;
    lock.unlock();
    solve(job);  // requests keep flowing meanwhile
    {
      std::lock_guard landing(outlet_.lock);
      complete(std::move(job));
    }
    lock.lock();
    solving_ = false;
    jobs_cv_.notify_all();
  }
}

void ReplanController::install_initial() {
  if (!planner_) throw InputError("engine", "needs a planner");
  PlannedPipeline p = planner_->plan(planned_for_, mode_, left_out());
  ReplanRecord r;
  r.detail = "planned for the first characteristics, mode " + mode_;
  r.new_plan = p.mnemonic;
  r.cost_source = p.cost_source;
  install_first(std::move(p.spec), std::move(r));
}

void ReplanController::install_initial(PipelineSpec spec) {
  ReplanRecord r;
  r.detail = "explicit pipeline";
  r.new_plan = spec.label.empty() ? describe(spec) : spec.label;
  install_first(std::move(spec), std::move(r));
}

void ReplanController::install_first(PipelineSpec spec, ReplanRecord r) {
  r.cause = "initial";
  r.swapped = true;
  r.new_epoch = epoch_ + 1;
  r.at_request = next_request_;
  install({std::move(r), std::move(spec), planned_for_}, -1.0);
}

std::optional<ReplanController::Trigger> ReplanController::check(const Characteristics& c, std::uint64_t seq) {
  if (const std::optional<DriftSignal> sig = drift_.observe(c, seq)) return Trigger{"drift", sig->detail, sig->target};
  // The planner's models changed (online refinement): is the running plan still the best?
  if (auto why = planner_ ? planner_->take_recheck() : std::nullopt) return Trigger{"model", *why, planned_for_};
  return std::nullopt;
}

void ReplanController::on_submit(const Characteristics& c, std::uint64_t seq) {
  take_stage_times();
  next_request_ = seq;  // a swap decided now serves this request already
  try {
    const std::optional<Trigger> t = check(c, seq);
    if (t && !job_out_) {  // a job out (solving beside) takes no other: the detector signals again
      PlanJob job = begin(t->cause, t->detail, t->target, SwapPolicy::if_gain);
      if (!outlet_.solve_beside) {
        settle(std::move(job));
      } else {
        job_out_ = true;
        std::lock_guard lock(jobs_mu_);
        queued_ = std::move(job);
        jobs_cv_.notify_all();
      }
    }
  } catch (const std::exception&) {
    // No plan, or the new pipeline could not be built: keep serving on the current one (a record
    // says why when there was no plan).
  }
  next_request_ = seq + 1;
}

ReplanController::PlanJob ReplanController::begin(const std::string& cause, const std::string& detail,
                                                  const Characteristics& target, SwapPolicy policy) const {
  PlanJob j;
  j.cause = cause;
  j.detail = detail;
  j.target = target;
  j.policy = policy;
  j.planner = planner_;
  j.mode = mode_;
  j.left_out = left_out();
  j.has_current = has_current_;
  j.current = current_;
  j.epoch = epoch_;
  j.t0 = hw::now_s();
  return j;
}

void ReplanController::solve(PlanJob& j) {
  try {
    if (!j.planner) throw Error("no planner");
    j.plan = j.planner->plan(j.target, j.mode, j.left_out);
  } catch (const std::exception& e) {
    j.error = e.what();
    return;
  }
  // Gain in the objective of the mode (period for perf, energy per inference otherwise).
  j.old_score = sched::kInf;
  try {
    if (j.has_current) j.old_score = j.planner->predict_score(j.current, j.target, j.mode);
  } catch (const std::exception&) {
  }
}

void ReplanController::complete(PlanJob job) {
  job_out_ = false;
  if (job.epoch != epoch_ || job.mode != mode_ || job.left_out != left_out()) {
    ReplanRecord r;
    r.cause = job.cause;
    r.detail = job.detail + " (superseded: the plan, mode or devices changed while it was solved)";
    r.old_plan = label_;
    r.old_epoch = epoch_;
    r.at_request = next_request_;
    add_record(r);
    return;
  }
  try {
    // The pause: building the new pipeline only; no request waited for the solve.
    const double t0 = hw::now_s();
    land(decide(std::move(job)), t0);
  } catch (const std::exception&) {
    // The new pipeline could not be built: keep serving on the current one (if_gain jobs do not
    // throw for want of a plan; that is recorded).
  }
}

void ReplanController::on_request_done(const RequestEvent& e) {
  if (e.failed) return;
  for (std::size_t s = 0; s < e.stages.size(); ++s)
    drift_.observe_stage_time(static_cast<int>(s), e.stages[s].predicted_s, e.stages[s].modelled_s, e.seq);
}

void ReplanController::take_stage_times() {
  for (const RequestEvent& e : stage_times_->take()) on_request_done(e);
}

void ReplanController::replan(const std::string& cause, const std::string& detail,
                              SwapPolicy policy) {
  settle(begin(cause, detail, planned_for_, policy));
}

void ReplanController::settle(PlanJob job) {
  const double t0 = job.t0;
  solve(job);
  land(decide(std::move(job)), t0);
}

ReplanController::Decision ReplanController::decide(PlanJob job) const {
  Decision d;
  ReplanRecord& r = d.record;
  r.cause = job.cause;
  r.detail = job.detail;
  r.old_plan = label_;
  r.old_epoch = epoch_;
  r.at_request = next_request_;
  d.planned_for = job.target;
  d.policy = job.policy;
  if (!job.plan) {
    r.detail += " (no plan: " + job.error + ")";
    d.no_plan = job.error;
    return d;
  }
  PlannedPipeline& p = *job.plan;
  const double old_score = job.old_score;
  r.new_plan = p.mnemonic;
  r.cost_source = p.cost_source;
  r.predicted_gain = (std::isfinite(old_score) && p.score > 0) ? old_score / p.score - 1.0 : INFINITY;
  const bool differs = !has_current_ || !same_layout(current_, p.spec);
  bool take = false;
  switch (job.policy) {
    case SwapPolicy::always: take = true; break;
    case SwapPolicy::if_different: take = differs; break;
    case SwapPolicy::if_gain: take = differs && r.predicted_gain > drift_.options().min_gain; break;
  }
  r.swapped = take;
  if (!take) {
    r.pause_s = hw::now_s() - job.t0;
    return d;
  }
  r.new_epoch = epoch_ + 1;
  d.spec = std::move(p.spec);
  return d;
}

void ReplanController::land(Decision d, double t0) {
  if (d.record.swapped) {
    install(std::move(d), t0);
    return;
  }
  add_record(d.record);
  if (d.no_plan) {
    if (d.policy != SwapPolicy::if_gain) throw Error(*d.no_plan);
    drift_.rebase(d.planned_for, d.record.at_request);  // drift keeps the current plan
    return;
  }
  // The current plan stands for these characteristics: later operator re-plans start from them.
  planned_for_ = d.planned_for;
  drift_.rebase(d.planned_for, d.record.at_request);
  for (Observer* o : *outlet_.observers->current()) o->on_replan(d.record);
}

void ReplanController::install(Decision d, double t0) {
  ReplanRecord& r = d.record;
  const double build_t0 = hw::now_s();
  outlet_.installer.install(d.spec, r.new_epoch);
  const double now = hw::now_s();
  r.build_s = now - build_t0;
  if (t0 >= 0) r.pause_s = now - t0;
  has_current_ = true;
  current_ = std::move(d.spec);
  label_ = r.new_plan;
  epoch_ = r.new_epoch;
  planned_for_ = d.planned_for;
  if (r.cause != "initial") {
    swaps_.count++;
    swaps_.max_pause_s = std::max(swaps_.max_pause_s, r.pause_s);
    swaps_.total_pause_s += r.pause_s;
  }
  add_record(r);
  drift_.rebase(d.planned_for, r.at_request);
  for (Observer* o : *outlet_.observers->current()) o->on_replan(r);
}

void ReplanController::swap_to(PipelineSpec spec, const std::string& label,
                               const std::string& cause, const std::string& detail) {
  const double t0 = hw::now_s();
  Decision d;
  ReplanRecord& r = d.record;
  r.cause = cause;
  r.detail = detail.empty() ? "swap_to " + (spec.label.empty() ? describe(spec) : spec.label) : detail;
  r.old_plan = label_;
  r.old_epoch = epoch_;
  r.new_epoch = epoch_ + 1;
  r.new_plan = label;
  r.at_request = next_request_;
  r.swapped = true;
  try {
    r.predicted_gain = planner_ && has_current_
                           ? planner_->predict_period_s(current_, planned_for_) /
                                     planner_->predict_period_s(spec, planned_for_) - 1.0
                           : 0.0;
  } catch (const std::exception&) {
    r.predicted_gain = 0.0;
  }
  d.spec = std::move(spec);
  d.planned_for = planned_for_;
  install(std::move(d), t0);
}

void ReplanController::restore(PipelineSpec spec, const std::string& label,
                               std::set<std::string> drained, const std::string& detail) {
  drained_ = std::move(drained);
  swap_to(std::move(spec), label, "rollback", detail);
}

void ReplanController::set_mode(const std::string& mode) {
  const std::string old = std::exchange(mode_, mode);
  try {
    replan("mode", "mode " + old + " -> " + mode, SwapPolicy::if_different);
  } catch (...) {
    mode_ = old;  // no plan for the new objective: keep serving under the old one
    throw;
  }
}

bool ReplanController::drain(const std::string& device, const std::string& cause,
                             const std::string& detail) {
  if (!drained_.insert(device).second) return false;
  try {
    replan(cause, detail.empty() ? "operator drained " + device : detail, SwapPolicy::if_different);
  } catch (...) {
    drained_.erase(device);  // still serving on it: the current plan stands
    throw;
  }
  return true;
}

bool ReplanController::undrain(const std::string& device, const std::string& cause,
                               const std::string& detail) {
  if (drained_.erase(device) == 0) return false;
  try {
    replan(cause, detail.empty() ? "operator undrained " + device : detail,
           SwapPolicy::if_different);
  } catch (...) {
    drained_.insert(device);
    throw;
  }
  return true;
}

void ReplanController::fail_over(const std::vector<std::string>& devices,
                                 const std::string& detail) {
  failed_.insert(devices.begin(), devices.end());
  replan("fault", detail, SwapPolicy::always);
}

bool ReplanController::fail_devices(const std::vector<std::string>& devices,
                                    const std::string& detail) {
  bool any = false;
  for (const std::string& d : devices) any = failed_.insert(d).second || any;
  if (!any) return false;
  replan("host lost", detail, SwapPolicy::if_different);
  return true;
}

bool ReplanController::restore_devices(const std::vector<std::string>& devices,
                                       const std::string& detail) {
  bool any = false;
  for (const std::string& d : devices) any = failed_.erase(d) > 0 || any;
  if (!any) return false;
  replan("rejoin", detail, SwapPolicy::if_different);
  return true;
}

std::set<std::string> ReplanController::left_out() const {
  std::set<std::string> out = failed_;
  out.insert(drained_.begin(), drained_.end());
  return out;
}

void ReplanController::add_record(const ReplanRecord& r) {
  records_.push_back(r);
  ++counts_[{r.cause, r.swapped}];
  while (records_.size() > kMaxRecords) records_.pop_front();
}

}  // namespace dype::rt
