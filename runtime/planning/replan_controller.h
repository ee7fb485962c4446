#pragma once
// ReplanController: when the engine should change its plan, and to what. Thread-free, like the
// scheduler (but for the stage_times() inbox the pipelines write): numbers in, an optional
// decision out; the engine calls it under its submission lock, builds what it decides and reports
// back (installed). Tested without threads or pipelines
// (tests/unit/test_rt_replan_controller.cpp).
//
// In: every request's characteristics in submission order (on_request), its stage times against
// the plan's (on_request_done, or through stage_times(), an observer on the engine's pipelines),
// and operator or fault changes (mode, drained and failed devices, replan, swap_to). It holds the
// drift detector (hysteresis, rate limit: drift.h), asks the planner, applies the swap policy, and
// keeps the re-plan records (the latest kMaxRecords) and counts.
//
// Out: std::nullopt when nothing was re-planned; otherwise a ReplanDecision whose record says why.
// record.swapped false: the current plan stands (the record is kept already; the engine tells its
// observers). record.swapped true: install `spec` as epoch record.new_epoch, then installed().
//
//   rt::ReplanController ctl(planner, "perf", {}, first.characteristics());
//   rt::ReplanDecision d = ctl.initial_plan();
//   ... build a pipeline for d.spec ...;  ctl.installed(d);
//   for each request, in order:
//     if (auto d = ctl.on_request(req.characteristics(), seq); d && d->record.swapped) {
//       ... build d->spec beside the old pipeline ...;  ctl.installed(*d);
//     }
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "runtime/planning/drift.h"
#include "runtime/observer.h"
#include "runtime/pipeline.h"
#include "runtime/planning/planner.h"

namespace dype::rt {

// When a new plan replaces the current one.
enum class SwapPolicy {
  if_gain,       // drift and model re-checks: it differs and beats the current one by min_gain
  if_different,  // operator changes (mode, drain, undrain, replan): it differs
  always,        // faults: rebuild even on the same layout
};

struct ReplanDecision {
  ReplanRecord record;          // why, old and new plan, predicted gain; swapped: install spec
  PipelineSpec spec;            // the plan to install (empty when the current one stands)
  Characteristics planned_for;  // what the plan is for
};

class ReplanController {
 public:
  static constexpr std::size_t kMaxRecords = 4096;

  // `planner` may be null when the first plan is explicit; re-planning then finds no plan.
  ReplanController(std::shared_ptr<Planner> planner, std::string mode, DriftOptions drift,
                   Characteristics planned_for);

  // The first plan: the planner's for the characteristics given at construction (throws when
  // none), or an explicit pipeline.
  ReplanDecision initial_plan();
  ReplanDecision initial_plan(PipelineSpec spec);

  // Request `seq` (submission order, before it runs): drift, or a re-check the planner asks for,
  // re-plans under the hysteresis. Never throws (no plan: the current one stands, recorded).
  std::optional<ReplanDecision> on_request(const Characteristics& c, std::uint64_t seq);
  // The same checks without the solve, for re-planning beside the pipeline: a job to solve
  // (solve(), no lock needed, then complete() under the caller's lock), or nothing. While a job
  // is out, no other is started (a signal meanwhile is dropped; the detector signals again).
  struct PlanJob {
    std::string cause, detail;
    Characteristics target;
    SwapPolicy policy = SwapPolicy::if_gain;
    // What the plan is made against (a job finished after any of them changed is stale).
    std::shared_ptr<Planner> planner;
    std::string mode;
    std::set<std::string> left_out;
    bool has_current = false;
    PipelineSpec current;
    std::uint64_t epoch = 0;
    double t0 = 0.0;  // when the re-plan began
    // Filled by solve().
    std::optional<PlannedPipeline> plan;
    std::string error;
    double old_score = 0.0;
  };
  std::optional<PlanJob> on_request_job(const Characteristics& c, std::uint64_t seq);
  // The planner's part of a job, touching no controller state (the planner guards its own).
  static void solve(PlanJob& job);
  // The decision for a solved job, as on_request would have made it; std::nullopt when the job is
  // stale (epoch, mode or left-out devices changed while it was solved: recorded, not applied).
  std::optional<ReplanDecision> complete(PlanJob job);

  // A finished request's stage times against the plan's (stage-time drift; failed ones ignored).
  void on_request_done(const RequestEvent& e);
  // The observer that hands the controller every finished request's stage times: the engine puts
  // it on each pipeline. The one part written from other threads (the pipelines'); what it holds
  // reaches on_request_done at the start of the next on_request or on_request_job.
  Observer& stage_times() const { return *stage_times_; }

  // Re-plans now for the current characteristics. Throws (recorded) when no plan exists, unless
  // the policy is if_gain.
  std::optional<ReplanDecision> replan(const std::string& cause, const std::string& detail, SwapPolicy policy);
  // Swaps to `spec` whatever the predicted gain (detail "swap_to <label>" unless given).
  ReplanDecision swap_to(PipelineSpec spec, const std::string& label, const std::string& cause,
                         const std::string& detail);
  // The engine built decision `d` and serves new requests on it (d.record carries its build and
  // pause times): it becomes the current plan, the drift baseline and a record.
  void installed(const ReplanDecision& d);

  // Plan inputs; changing them re-plans nothing by itself (call replan).
  const std::string& mode() const { return mode_; }
  void set_mode(std::string mode) { mode_ = std::move(mode); }
  bool drain(const std::string& device) { return drained_.insert(device).second; }
  bool undrain(const std::string& device) { return drained_.erase(device) > 0; }
  void set_drained(std::set<std::string> drained) { drained_ = std::move(drained); }
  const std::set<std::string>& drained() const { return drained_; }
  // A failed device stays out of every plan for good.
  void fail_device(const std::string& device) { failed_.insert(device); }
  bool unfail_device(const std::string& device) { return failed_.erase(device) > 0; }
  const std::set<std::string>& failed_devices() const { return failed_; }
  bool failed(const std::string& device) const { return failed_.count(device) > 0; }

  std::uint64_t epoch() const { return epoch_; }
  const std::string& label() const { return label_; }
  // What the current plan was made for, and the devices every plan leaves out (failed, drained).
  const Characteristics& planned_for() const { return planned_for_; }
  std::set<std::string> left_out_devices() const { return left_out(); }
  const PipelineSpec& spec() const { return current_; }
  // The drift detector's current view (thresholds, baseline, recent window).
  DriftWatch drift_watch() const { return drift_.watch(); }
  const std::deque<ReplanRecord>& records() const { return records_; }
  // Every re-plan by (cause, swapped), including records no longer kept.
  const std::map<std::pair<std::string, bool>, std::uint64_t>& counts() const { return counts_; }
  struct Swaps {
    std::uint64_t count = 0;     // installs after the first
    double max_pause_s = 0.0;    // measured
    double total_pause_s = 0.0;  // measured
  };
  const Swaps& swaps() const { return swaps_; }

 private:
  std::optional<ReplanDecision> replan_for(const std::string& cause, const std::string& detail,
                                           const Characteristics& target, SwapPolicy policy);
  PlanJob begin(const std::string& cause, const std::string& detail, const Characteristics& target,
                SwapPolicy policy) const;
  // complete() for a job that is not stale; throws (recorded) as replan does.
  std::optional<ReplanDecision> decide(PlanJob job);
  // Drift or the planner's re-check for request `seq`: (cause, detail, target), or nothing.
  struct Trigger {
    std::string cause, detail;
    Characteristics target;
  };
  std::optional<Trigger> check(const Characteristics& c, std::uint64_t seq);
  std::set<std::string> left_out() const;  // failed + drained
  void take_stage_times();                 // stage_times_ -> on_request_done
  void add_record(const ReplanRecord& r);

  std::shared_ptr<Planner> planner_;
  std::unique_ptr<RequestEventQueue> stage_times_ = std::make_unique<RequestEventQueue>();
  std::string mode_;
  DriftDetector drift_;
  Characteristics planned_for_;
  std::set<std::string> failed_;
  std::set<std::string> drained_;
  bool has_current_ = false;
  PipelineSpec current_;
  std::string label_;
  std::uint64_t epoch_ = 0;
  std::uint64_t next_request_ = 0;  // the index a re-plan now is recorded at
  bool job_out_ = false;            // a PlanJob is being solved beside the pipeline
  std::deque<ReplanRecord> records_;
  std::map<std::pair<std::string, bool>, std::uint64_t> counts_;
  Swaps swaps_;
};

}  // namespace dype::rt
