#pragma once
// Engine: the runtime as a library. Takes requests, returns futures (and optional callbacks),
// runs them through the current pipeline, and re-plans while it runs.
//
//   auto sys = hw::System::from_config(hw::load_system_config("configs/systems/paper-testbed-pcie4.yaml"));
//   rt::Model model = rt::Model::gcn({.in_features = 64});
//   rt::Engine engine(model, std::make_shared<rt::SchedPlanner>(model, sys), first.characteristics());
//   std::future<rt::HostTensor> y = engine.submit(first);
//   engine.set_mode("energy");     // re-plans now
//   engine.drain();
//
// Plans are versioned epochs. A swap (drift, mode change, fault, or swap_to) builds the new
// pipeline beside the old one (preloading graph rows and weights on its devices), routes new
// requests to it and closes the old one, which drains on its own. Responses are released in
// submission order whatever pipeline served them (a reorder buffer), so no request is lost,
// answered twice or reordered. The pause a client sees during a swap is measured and recorded.
// A DeviceError marks the device failed: the engine re-plans without it and re-runs every request
// that failed; if no plan is left the request fails with the device's name.
//
// Operators drain a device (drain_device: re-plan without it; requests already in a pipeline that
// uses it finish there, so none is lost) and let it back in (undrain_device), e.g. around an FPGA
// bitstream swap, where the device's kernels change while it is out of every plan.
//
// Callbacks run on a pipeline thread, in order; they must not block or submit.
//
// Drift and model re-checks are solved on the re-plan controller's planner thread (EngineOptions::
// replan_beside): the request that detected the drift is queued at once on the current plan, and
// the swap lands when the solve is done. Operator changes (mode, drain, undrain, replan) and
// faults re-plan at once, holding submissions while they solve.
//
// The engine itself validates, hands each request's characteristics and each operator or fault
// change to its ReplanController (replan_controller.h: drift, planner, swap policy, records and the
// planner thread), builds the pipeline when the controller calls install() with a new plan, and
// submits. Answers leave through a
// ReorderBuffer (reorder_buffer.h), failed requests through FaultRecovery (fault_recovery.h), and
// energy is counted by an EnergyObserver (energy_observer.h) on every pipeline.
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/planning/drift.h"
#include "runtime/energy_observer.h"
#include "runtime/fault_recovery.h"
#include "runtime/model.h"
#include "runtime/observer.h"
#include "runtime/pipeline.h"
#include "runtime/planning/planner.h"
#include "runtime/reorder_buffer.h"
#include "runtime/planning/replan_controller.h"

namespace dype::rt {

struct EngineOptions {
  std::size_t queue_capacity = 2;  // per inter-stage queue
  std::size_t max_in_flight = 8;   // submit() blocks beyond this (closed loop)
  std::string mode = "perf";       // perf | energy | balanced | qos
  DriftOptions drift;
  int max_retries = 3;             // re-runs of one request after device faults
  // Drift and model re-checks are solved on the controller's planner thread, beside the pipeline:
  // no request waits on a solve, and a swap serves the requests submitted after it lands. false:
  // solved on the path of the request that detected the drift, which it then serves (the order of
  // swaps and requests is then reproducible: modelled benchmarks use it).
  bool replan_beside = true;
  // Observers from the first pipeline on, e.g. a PerfModelPlanner refining its models from every
  // request's kernel times (add_observer adds more, heard by the running pipeline too).
  std::vector<std::shared_ptr<Observer>> observers;
  // Called with each pipeline's spec before the pipeline is built: e.g. attaches a StageLink to
  // every stage whose devices are on another host (runtime/remote/remote_stages.h). May throw to
  // refuse the spec (the plan is then not installed).
  std::function<void(PipelineSpec&)> prepare_spec;
  // The devices that fail with `device` (itself included): every device of the same other host
  // when it stopped answering. Unset: the device alone.
  std::function<std::vector<std::string>(const std::string& device)> failure_domain;
  // Devices out of every plan from the start, as failed ones: another host's that has not joined
  // yet (restore_devices lets them in).
  std::set<std::string> absent_devices{};
};

struct EngineStats {
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;
  std::uint64_t failed = 0;
  std::uint64_t cancelled = 0;  // expired (CancelToken) before they finished: stages left not run
  std::uint64_t reruns = 0;
  std::uint64_t epoch = 0;
  std::uint64_t swaps = 0;
  double max_pause_s = 0.0;      // measured
  double total_pause_s = 0.0;    // measured
  double modelled_makespan_s = 0.0;  // latest modelled completion (emulated devices)
  // Modelled energy of the answered requests: per stage, its modelled busy time times the execute
  // power of its devices (emulated device models; idle power of unused devices not included).
  double modelled_energy_j = 0.0;
  std::vector<std::string> failed_devices;
};

class Engine : private PlanInstaller {
 public:
  // Plans for `initial` and builds epoch 1. Throws when no plan exists.
  Engine(const Model& model, std::shared_ptr<Planner> planner, const Characteristics& initial,
         EngineOptions options = {});
  // Starts from an explicit pipeline (no planner needed until drift or a fault).
  Engine(const Model& model, std::shared_ptr<Planner> planner, PipelineSpec initial,
         const Characteristics& planned_for, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates (InputError at once), then queues; blocks while max_in_flight are outstanding.
  std::future<HostTensor> submit(Request request, ResponseCallback callback = {});
  // submit() for a caller that must not wait (an HTTP I/O thread): validates (InputError at once),
  // then queues `request` and returns true if that needs no wait: a free slot under max_in_flight,
  // no operator change or swap holding submissions, room in the pipeline's input queue, and
  // re-plans solved beside the pipeline (replan_beside). Otherwise false, `request` untouched
  // (call submit() from a thread that may wait). `done` gets the answer like a callback: on a
  // pipeline thread, in order; it must not block, submit or throw.
  bool try_submit(Request& request, AnswerCallback done);
  // Swaps to `spec` now (cause "manual" unless given), whatever the predicted gain.
  void swap_to(PipelineSpec spec, const std::string& label = "manual", const std::string& cause = "manual",
               const std::string& detail = "");
  // Leaves `device` out of every plan until undrain_device: re-plans without it now (cause
  // "drain" unless given; swaps only when the current pipeline uses it), then waits up to timeout_s until no
  // pipeline that uses it has work left. Throws dype::Error, with the device still in service,
  // when no plan exists without it. Returns false when the wait timed out.
  bool drain_device(const std::string& device, const std::string& cause = "drain", const std::string& detail = "",
                    double timeout_s = 60.0);
  // Lets a drained device back in and re-plans (cause, e.g. "undrain" or "bitstream"; swaps when
  // the plan differs). Throws dype::Error, with the device drained again, when no plan exists.
  void undrain_device(const std::string& device, const std::string& cause = "undrain", const std::string& detail = "");
  // Devices that failed work again (their host answers again): plans may use them, and the engine
  // re-plans now (cause "rejoin"; swaps when the plan differs). Returns whether any was failed.
  bool restore_devices(const std::vector<std::string>& devices, const std::string& detail);
  // Devices found dead outside a request (their host stopped answering its heartbeats): out of
  // every plan, re-planned now (cause "host lost"; swaps when the plan used them). Requests already
  // on them fail over as after any device fault. Returns whether any was not failed yet. Throws
  // dype::Error when no plan is left (the devices stay failed).
  bool fail_devices(const std::vector<std::string>& devices, const std::string& detail);
  // Re-plans now for the current characteristics (swaps when the plan differs), e.g. after the
  // kernels a device offers changed.
  void replan(const std::string& cause, const std::string& detail);
  // True when no pipeline (current or retired) that uses `device` still has work; waits up to timeout_s.
  bool wait_device_idle(const std::string& device, double timeout_s);
  std::set<std::string> drained_devices() const;
  // Rollback of an operator change: the drained set and the pipeline as they were (cause
  // "rollback"), without asking the planner.
  void restore(PipelineSpec spec, const std::string& label, std::set<std::string> drained, const std::string& detail);
  // Changes the objective and re-plans at once.
  void set_mode(const std::string& mode);
  // Waits until every re-plan they started has landed and every submitted request has been answered.
  void drain();
  // Waits until no re-plan is queued or being solved beside the pipeline (tests, benchmarks).
  void wait_replans();

  // From the running pipeline's next event on, and every pipeline after it.
  void add_observer(std::shared_ptr<Observer> observer);
  // The latest re-plan records (at most kMaxReplanRecords: a daemon re-checking its plan on a
  // drifting stream for weeks must not grow without bound) and how many there were in all.
  std::vector<ReplanRecord> replans() const;
  static constexpr std::size_t kMaxReplanRecords = ReplanController::kMaxRecords;
  // Every re-plan since the engine started, by (cause, swapped), including records no longer kept.
  std::map<std::pair<std::string, bool>, std::uint64_t> replan_counts() const;
  EngineStats stats() const;
  std::uint64_t epoch() const;
  PipelineSpec current_spec() const;
  std::string current_label() const;
  // What a plan made now would be for: the characteristics, the objective, the devices left out
  // (failed and drained). Image choice plans with them.
  struct PlanningState {
    Characteristics characteristics;
    std::string mode;
    std::set<std::string> left_out;
  };
  PlanningState planning_state() const;
  // Per-stage figures of the current pipeline.
  std::vector<StageStats> stage_stats() const;
  // What the drift detector watches now, with its thresholds.
  DriftWatch drift_watch() const;

 private:
  // The controller's one call when it decided a plan (under submit_mu_): builds `spec` beside the
  // current pipeline and routes new requests to it; the old one drains on its own.
  void install(PipelineSpec spec, std::uint64_t epoch) override;
  ReplanController::Outlet outlet();
  // Fault recovery's way back in: re-plan without a failed device, re-submit the request.
  FaultRecovery::Rerun rerun(const FaultRecovery::Failed& f);
  void start_recovery();

  const Model& model_;
  EngineOptions options_;
  // The engine's own observers, on every pipeline: the energy account, and the controller's
  // stage_times() (what its drift detector reads).
  std::shared_ptr<EnergyObserver> energy_ = std::make_shared<EnergyObserver>();
  // EngineOptions::observers and those added since: every pipeline reads it at each event, and
  // the controller tells it each re-plan record.
  std::shared_ptr<ObserverSet> observers_ = std::make_shared<ObserverSet>();

  ReorderBuffer answers_;

  mutable std::mutex submit_mu_;  // submissions, swaps, re-runs: one at a time, in order
  // Owns the planner thread (replan_beside), which takes submit_mu_ to install a plan it solved.
  ReplanController controller_;
  std::shared_ptr<Pipeline> current_;
  std::vector<std::shared_ptr<Pipeline>> retired_;
  std::uint64_t next_seq_ = 0;
  std::shared_ptr<const Graph> last_graph_;

  std::unique_ptr<FaultRecovery> recovery_;  // last: its thread calls back into the members above
};

}  // namespace dype::rt
