#pragma once
// PerfModelPlanner: the runtime planner on fitted performance models (perfmodel/, one ModelStore
// per device model, e.g. configs/perfmodels/amd-mi210.json written by dype-profile) instead of the
// devices' own models. A kernel a store lacks, or a device with no store, falls back to the
// device model; every plan says which (PlannedPipeline::cost_source, copied into the re-plan
// record).
//
// Online refinement: attached to the engine as an Observer, it receives every kernel launch's time
// (modelled on emulated devices, measured on real ones) with the shard shape it ran, and refines
// the fitted model (perf::KernelModel::refine: RLS correction with outlier gating, so one slow
// launch moves nothing and a persistent shift is accepted as a regime change). When a refined
// prediction has moved by more than `recheck_threshold` from what the running plan assumed, it
// asks the engine (take_recheck) to re-check the plan under the refined models; the engine swaps
// only if the new plan beats the running one by its hysteresis margin.
//
//   auto planner = std::make_shared<rt::PerfModelPlanner>(model, sys,
//       rt::PerfModelPlanner::load_stores({"configs/perfmodels/amd-mi210.json"}));
//   rt::Engine engine(model, planner, first.characteristics());
//   engine.add_observer(planner);
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/op.h"
#include "perfmodel/model_store.h"
#include "runtime/observer.h"
#include "runtime/planning/planner.h"

namespace dype::rt {

struct PerfPlannerOptions {
  perf::RefineOptions refine;
  bool refine_online = true;
  double recheck_threshold = 0.2;  // relative move of a refined prediction since the last plan
  // ... seen on this many launches of that kernel in a row before the plan is re-checked: a model
  // whose correction swings between the shapes of one request (two GEMMs it mispredicts in
  // opposite directions) would otherwise ask for a re-check every few requests.
  int recheck_sustain = 3;
};

class PerfModelPlanner : public SchedPlanner, public Observer {
 public:
  PerfModelPlanner(const Model& model, const hw::System& system, std::vector<perf::ModelStore> stores,
                   PerfPlannerOptions options = {}, sched::SolverKind solver = sched::SolverKind::exact);
  // perf::ModelStore::load for each file (InputError naming the file and key on bad input).
  static std::vector<perf::ModelStore> load_stores(const std::vector<std::string>& files);
  // The fitted models in `dir` for the system's device models (<device model>.json), each once;
  // none when `dir` is empty. InputError when `dir` is not a directory or a file is bad.
  static std::vector<perf::ModelStore> stores_for(const hw::System& system, const std::string& dir);

  PlannedPipeline plan(const Characteristics& c, const std::string& mode,
                       const std::set<std::string>& excluded_devices) override;
  std::optional<std::string> take_recheck() override;
  void on_stage(const StageEvent& event) override;

  // Per device model, which kernels use a fitted model and which the device model.
  const std::string& cost_source() const { return cost_source_; }
  // The time the planner predicts now for `shape` on `device` (refined fitted model, else the
  // device model; kInf when the device cannot run it).
  double kernel_time_s(const hw::Device& device, const kernels::OpShape& shape) const;
  // The stores as refined so far (to save them).
  std::vector<perf::ModelStore> stores() const;

  struct Counters {
    std::uint64_t accepted = 0;   // refinements taken (regime changes included)
    std::uint64_t rejected = 0;   // outliers gated out
    std::uint64_t rechecks = 0;   // times a re-check was requested
  };
  Counters counters() const;

 private:
  const hw::System& sys_;
  PerfPlannerOptions options_;
  std::string cost_source_;
  mutable std::mutex mu_;
  std::map<std::string, perf::ModelStore> stores_;   // by device model id
  std::map<std::string, perf::ModelStore> planned_;  // the stores as the last plan saw them
  std::optional<std::string> recheck_;
  // Launches in a row whose refined prediction is beyond the threshold, by (device model, kernel).
  std::map<std::pair<std::string, kernels::OpKind>, int> moved_run_;
  Counters counters_;
};

// The device model id of a device ("amd-mi210"): its emulated model's, else its system config's;
// "" when unknown.
std::string device_profile_id(const hw::System& system, const hw::Device& device);

}  // namespace dype::rt
