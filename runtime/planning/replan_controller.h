#pragma once
// ReplanController: when the engine should change its plan, and to what. It holds the drift
// detector (hysteresis, rate limit: drift.h), asks the planner, applies the swap policy, keeps the
// re-plan records (the latest kMaxRecords) and counts, and owns the planner thread that solves
// drift and model re-checks beside the pipeline. A decided plan reaches the engine as one call,
// PlanInstaller::install; the controller then makes it the current plan and tells the observers
// the record. Tested with a recording installer (tests/unit/test_rt_replan_controller.cpp).
//
// In: every request's characteristics in submission order (on_submit), its stage times against
// the plan's (on_request_done, or through stage_times(), an observer on the engine's pipelines),
// and operator or fault changes (mode, drained and failed devices, replan, swap_to), each of which
// re-plans at once. Every call is made under the outlet's lock (the engine's submission lock); the
// planner thread takes that lock to land a plan it solved.
//
//   struct Builder : rt::PlanInstaller {
//     void install(rt::PipelineSpec spec, std::uint64_t epoch) override;  // build, route to it
//   } builder;
//   std::mutex submissions;
//   auto observers = std::make_shared<rt::ObserverSet>();
//   rt::ReplanController ctl(planner, "perf", {}, first.characteristics(),
//                            {.installer = builder, .lock = submissions, .observers = observers});
//   std::lock_guard lock(submissions);
//   ctl.install_initial();                                // builder.install(spec, 1)
//   for each request, in order: ctl.on_submit(req.characteristics(), seq);  // may install
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// Where the controller's plans land: the engine.
class PlanInstaller {
 public:
  // Builds `spec` beside the running pipeline as epoch `epoch` and routes new requests to it.
  // Throws when it cannot be built: the running pipeline stays.
  virtual void install(PipelineSpec spec, std::uint64_t epoch) = 0;

 protected:
  ~PlanInstaller() = default;
};

class ReplanController {
 public:
  static constexpr std::size_t kMaxRecords = 4096;

  // What the controller serves: the installer, the lock every call into it is made under (the
  // planner thread takes it too), the observers that hear each re-plan record, and whether drift
  // and model re-checks are solved on the planner thread (otherwise on the requesting call).
  struct Outlet {
    PlanInstaller& installer;
    std::mutex& lock;
    std::shared_ptr<const ObserverSet> observers;
    bool solve_beside = false;
  };

  // `planner` may be null when the first plan is explicit; re-planning then finds no plan.
  ReplanController(std::shared_ptr<Planner> planner, std::string mode, DriftOptions drift,
                   Characteristics planned_for, Outlet outlet);
  // Stops the planner thread (stop()).
  ~ReplanController();
  ReplanController(const ReplanController&) = delete;
  ReplanController& operator=(const ReplanController&) = delete;

  // The first plan, installed as epoch 1: the planner's for the characteristics given at
  // construction (throws when none), or an explicit pipeline.
  void install_initial();
  void install_initial(PipelineSpec spec);

  // Request `seq` (submission order, before it runs): drift, or a re-check the planner asks for,
  // re-plans under the hysteresis. solve_beside: the solve is queued for the planner thread
  // (while one is queued or solving, another signal is dropped: the detector signals again),
  // which lands it under the outlet's lock, or records it as superseded when the plan, mode or
  // devices changed meanwhile. Otherwise it is solved here and a swap serves this request already.
  // Never throws: without a plan, or when it cannot be built, the current one stands.
  void on_submit(const Characteristics& c, std::uint64_t seq);
  // Waits until no re-plan is queued or being solved on the planner thread. Called without the
  // outlet's lock.
  void wait_replans();
  // Ends the planner thread (a solve under way lands first; a queued one is dropped). Called
  // without the outlet's lock; further calls do nothing.
  void stop();

  // A finished request's stage times against the plan's (stage-time drift; failed ones ignored).
  void on_request_done(const RequestEvent& e);
  // The observer that hands the controller every finished request's stage times: the engine puts
  // it on each pipeline. The one part written from other threads (the pipelines'); what it holds
  // reaches on_request_done at the start of the next on_submit.
  Observer& stage_times() const { return *stage_times_; }

  // Operator and fault changes: each re-plans now and installs what it decides. They throw when
  // no plan exists (recorded) or the plan cannot be built; set_mode, drain and undrain then put
  // their change back, so the current plan stands under the inputs it was made with.
  // Re-plans for the current characteristics.
  void replan(const std::string& cause, const std::string& detail, SwapPolicy policy);
  // Swaps to `spec` whatever the predicted gain (detail "swap_to <label>" unless given).
  void swap_to(PipelineSpec spec, const std::string& label, const std::string& cause,
               const std::string& detail);
  // Rollback of an operator change: `drained` as it was and `spec` (cause "rollback").
  void restore(PipelineSpec spec, const std::string& label, std::set<std::string> drained,
               const std::string& detail);
  void set_mode(const std::string& mode);  // cause "mode"
  // Leaves `device` out of every plan (false, nothing re-planned, when it was out already).
  bool drain(const std::string& device, const std::string& cause, const std::string& detail);
  // Lets a drained device back in (false, nothing re-planned, when it was not drained).
  bool undrain(const std::string& device, const std::string& cause, const std::string& detail);
  // A device fault: `devices` out of every plan for good, and the pipeline rebuilt at once even
  // on the same layout (cause "fault").
  void fail_over(const std::vector<std::string>& devices, const std::string& detail);
  // Devices found dead outside a request: out of every plan, re-planned (cause "host lost") when
  // any was not failed yet. Returns whether any was not.
  bool fail_devices(const std::vector<std::string>& devices, const std::string& detail);
  // Failed devices that work again: re-planned (cause "rejoin") when any was failed. Returns
  // whether any was.
  bool restore_devices(const std::vector<std::string>& devices, const std::string& detail);

  // Before the first plan: a device absent from the start, out of every plan as a failed one.
  void fail_device(const std::string& device) { failed_.insert(device); }
  const std::string& mode() const { return mode_; }
  const std::set<std::string>& drained() const { return drained_; }
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
  // A re-plan's solve: what it is made against (a job finished after any of them changed is
  // stale) and, once solve() ran, its result.
  struct PlanJob {
    std::string cause, detail;
    Characteristics target;
    SwapPolicy policy = SwapPolicy::if_gain;
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
  // What a solved job says, before anything is changed. record.swapped: install `spec` as epoch
  // record.new_epoch. Otherwise the current plan stands for `planned_for`, or there was no plan
  // (`no_plan`: the planner's reason, thrown unless the policy is if_gain).
  struct Decision {
    ReplanRecord record;
    PipelineSpec spec;
    Characteristics planned_for;
    SwapPolicy policy = SwapPolicy::if_gain;
    std::optional<std::string> no_plan{};
  };

  // The first plan, `r` saying what it is (plan, detail, cost source).
  void install_first(PipelineSpec spec, ReplanRecord r);
  PlanJob begin(const std::string& cause, const std::string& detail, const Characteristics& target,
                SwapPolicy policy) const;
  // The planner's part of a job, touching no controller state (the planner guards its own).
  static void solve(PlanJob& job);
  // The decision for a solved job, under the swap policy; changes nothing.
  Decision decide(PlanJob job) const;
  // solve, decide and land, on the caller's thread.
  void settle(PlanJob job);
  // Acts on a decision: installs a swap; otherwise records it and rebases the drift detector (a
  // plan that stands is told to the observers; no plan throws unless the policy is if_gain).
  // t0: when the re-plan began (the pause a client saw); < 0 for the first plan (nobody waited).
  void land(Decision d, double t0);
  // Has the installer build d.spec; then it is the current plan, the drift baseline and a record,
  // and the observers hear that record.
  void install(Decision d, double t0);
  // Drift or the planner's re-check for request `seq`: (cause, detail, target), or nothing.
  struct Trigger {
    std::string cause, detail;
    Characteristics target;
  };
  std::optional<Trigger> check(const Characteristics& c, std::uint64_t seq);
  // The planner thread: solves queued jobs without the outlet's lock, lands them under it.
  void plan_loop();
  // A job solved beside the pipeline, under the outlet's lock: landed, or recorded as stale.
  void complete(PlanJob job);
  std::set<std::string> left_out() const;  // failed + drained
  void take_stage_times();                 // stage_times_ -> on_request_done
  void add_record(const ReplanRecord& r);

  std::shared_ptr<Planner> planner_;
  Outlet outlet_;
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
  bool job_out_ = false;            // a PlanJob is queued for or being solved by the planner thread
  std::deque<ReplanRecord> records_;
  std::map<std::pair<std::string, bool>, std::uint64_t> counts_;
  Swaps swaps_;

  // The planner thread's queue (its own lock: taken after the outlet's, never the other way).
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::optional<PlanJob> queued_;  // at most one: a signal while one is out is dropped
  bool solving_ = false;           // a job is being solved or landed
  bool stopping_ = false;
  std::thread planner_thread_;
};

}  // namespace dype::rt
