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

ReplanController::ReplanController(std::shared_ptr<Planner> planner, std::string mode, DriftOptions drift,
                                   Characteristics planned_for)
    : planner_(std::move(planner)), mode_(std::move(mode)), drift_(drift, planned_for), planned_for_(planned_for) {}

ReplanDecision ReplanController::initial_plan() {
  if (!planner_) throw InputError("engine", "needs a planner");
  PlannedPipeline p = planner_->plan(planned_for_, mode_, left_out());
  ReplanDecision d;
  d.record.cause = "initial";
  d.record.detail = "planned for the first characteristics, mode " + mode_;
  d.record.new_plan = p.mnemonic;
  d.record.cost_source = p.cost_source;
  d.record.swapped = true;
  d.record.new_epoch = epoch_ + 1;
  d.record.at_request = next_request_;
  d.spec = std::move(p.spec);
  d.planned_for = planned_for_;
  return d;
}

ReplanDecision ReplanController::initial_plan(PipelineSpec spec) {
  ReplanDecision d;
  d.record.cause = "initial";
  d.record.detail = "explicit pipeline";
  d.record.new_plan = spec.label.empty() ? describe(spec) : spec.label;
  d.record.swapped = true;
  d.record.new_epoch = epoch_ + 1;
  d.record.at_request = next_request_;
  d.spec = std::move(spec);
  d.planned_for = planned_for_;
  return d;
}

std::optional<ReplanController::Trigger> ReplanController::check(const Characteristics& c, std::uint64_t seq) {
  if (const std::optional<DriftSignal> sig = drift_.observe(c, seq)) return Trigger{"drift", sig->detail, sig->target};
  // The planner's models changed (online refinement): is the running plan still the best?
  if (auto why = planner_ ? planner_->take_recheck() : std::nullopt) return Trigger{"model", *why, planned_for_};
  return std::nullopt;
}

std::optional<ReplanDecision> ReplanController::on_request(const Characteristics& c, std::uint64_t seq) {
  take_stage_times();
  next_request_ = seq;  // a swap decided now serves this request already
  std::optional<ReplanDecision> out;
  try {
    if (const auto t = check(c, seq)) out = replan_for(t->cause, t->detail, t->target, SwapPolicy::if_gain);
  } catch (const std::exception&) {
    // Keep serving on the current plan; the record says why no swap happened.
    out.reset();
  }
  next_request_ = seq + 1;
  return out;
}

std::optional<ReplanController::PlanJob> ReplanController::on_request_job(const Characteristics& c,
                                                                          std::uint64_t seq) {
  take_stage_times();
  next_request_ = seq;
  std::optional<PlanJob> out;
  try {
    const auto t = check(c, seq);
    if (t && !job_out_) {
      out = begin(t->cause, t->detail, t->target, SwapPolicy::if_gain);
      job_out_ = true;
    }
  } catch (const std::exception&) {
    out.reset();
  }
  next_request_ = seq + 1;
  return out;
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

std::optional<ReplanDecision> ReplanController::complete(PlanJob job) {
  job_out_ = false;
  if (job.epoch != epoch_ || job.mode != mode_ || job.left_out != left_out()) {
    ReplanRecord r;
    r.cause = job.cause;
    r.detail = job.detail + " (superseded: the plan, mode or devices changed while it was solved)";
    r.old_plan = label_;
    r.old_epoch = epoch_;
    r.at_request = next_request_;
    add_record(r);
    return std::nullopt;
  }
  try {
    return decide(std::move(job));
  } catch (const std::exception&) {
    return std::nullopt;  // if_gain jobs do not throw; recorded either way
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

std::optional<ReplanDecision> ReplanController::replan(const std::string& cause, const std::string& detail,
                                                       SwapPolicy policy) {
  return replan_for(cause, detail, planned_for_, policy);
}

std::optional<ReplanDecision> ReplanController::replan_for(const std::string& cause, const std::string& detail,
                                                           const Characteristics& target, SwapPolicy policy) {
  PlanJob job = begin(cause, detail, target, policy);
  solve(job);
  return decide(std::move(job));
}

std::optional<ReplanDecision> ReplanController::decide(PlanJob job) {
  ReplanDecision d;
  ReplanRecord& r = d.record;
  r.cause = job.cause;
  r.detail = job.detail;
  r.old_plan = label_;
  r.old_epoch = epoch_;
  r.at_request = next_request_;
  const Characteristics& target = job.target;
  if (!job.plan) {
    r.detail += " (no plan: " + job.error + ")";
    r.swapped = false;
    add_record(r);
    if (job.policy != SwapPolicy::if_gain) throw Error(job.error);
    drift_.rebase(target, next_request_);
    return std::nullopt;
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
  d.planned_for = target;
  if (!take) {
    r.swapped = false;
    r.pause_s = hw::now_s() - job.t0;
    add_record(r);
    planned_for_ = target;  // later operator re-plans start from what the stream looks like now
    drift_.rebase(target, next_request_);  // the current plan stands for these characteristics
    return d;
  }
  r.swapped = true;
  r.new_epoch = epoch_ + 1;
  d.spec = std::move(p.spec);
  return d;
}

ReplanDecision ReplanController::swap_to(PipelineSpec spec, const std::string& label, const std::string& cause,
                                         const std::string& detail) {
  ReplanDecision d;
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
  return d;
}

void ReplanController::installed(const ReplanDecision& d) {
  const ReplanRecord& r = d.record;
  has_current_ = true;
  current_ = d.spec;
  label_ = r.new_plan;
  epoch_ = r.new_epoch;
  planned_for_ = d.planned_for;
  drift_.rebase(d.planned_for, r.at_request);
  if (r.cause != "initial") {
    swaps_.count++;
    swaps_.max_pause_s = std::max(swaps_.max_pause_s, r.pause_s);
    swaps_.total_pause_s += r.pause_s;
  }
  add_record(r);
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
