#pragma once
// Planner: how the runtime asks for a plan. SchedPlanner is the adapter onto the DyPe scheduler
// (scheduler/solver.h): it describes the hw::System to the scheduler as device kinds with counts,
// power and links (sched::SystemSpec), builds a cost model of what this runtime does with a plan
// (RuntimeCostModel: kernel times for each stage's shards, host I/O, intra-stage gathers and
// hand-offs as the transfer engine performs them), solves for the objective (perf | energy |
// balanced | qos), and turns the sched::Plan's (kind, count) stages into concrete devices.
// Devices marked failed are left out. Kernel times come from the devices' own models (modelled).
//   auto planner = std::make_shared<rt::SchedPlanner>(model, system);
//   rt::PlannedPipeline p = planner->plan(req.characteristics(), "balanced", {});
//   std::cout << p.mnemonic << " " << rt::describe(p.spec);
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "hw/system.h"
#include "runtime/handoff_route.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "runtime/planning/planning_kinds.h"
#include "runtime/planning/runtime_cost_model.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"

namespace dype::rt {

struct PlannedPipeline {
  PipelineSpec spec;
  std::string mnemonic;         // "3F2G"
  double period_s = 0.0;        // predicted (modelled)
  double energy_j = 0.0;        // predicted per inference (modelled)
  double score = 0.0;           // the objective's value (period for perf, energy otherwise)
  std::string cost_source;      // where the kernel times came from ("device models", fitted models...)
};

class Planner {
 public:
  virtual ~Planner() = default;
  // Throws dype::Error (sched::InfeasibleError, or when no device can run a kernel).
  virtual PlannedPipeline plan(const Characteristics& c, const std::string& mode,
                               const std::set<std::string>& excluded_devices) = 0;
  // Predicted period of an existing pipeline under (possibly new) characteristics.
  virtual double predict_period_s(const PipelineSpec& spec, const Characteristics& c) = 0;
  // The objective's value for an existing pipeline (lower is better, comparable with
  // PlannedPipeline::score): period for perf, energy per inference otherwise; kInf when the
  // pipeline breaks the objective's constraint (balanced: throughput below its share of the
  // perf optimum). Re-planning compares this with the new plan's score, so a hysteresis margin
  // means "this much better in the objective the operator asked for".
  virtual double predict_score(const PipelineSpec& spec, const Characteristics& c, const std::string& mode) {
    (void)mode;
    return predict_period_s(spec, c);
  }
  // A reason to re-check the running plan that is not in the requests (e.g. the performance
  // models were refined from measured stage times since the last plan); empty otherwise. Taking
  // it clears it. The engine polls it from its submit path.
  virtual std::optional<std::string> take_recheck() { return std::nullopt; }
};

// Throws dype::Error naming the first kernel of the chain that no usable device runs (by name and
// op) and why each device does not: drained, not schedulable, another bitstream, not supported.
void require_every_kernel_runs(const Model& model, const hw::System& system, const std::set<std::string>& excluded);


class SchedPlanner : public Planner {
 public:
  // Kernel times from the devices' models (EmuDevice ground truth, modelled_kernel_time_s).
  SchedPlanner(const Model& model, const hw::System& system,
               sched::SolverKind solver = sched::SolverKind::exact);
  PlannedPipeline plan(const Characteristics& c, const std::string& mode,
                       const std::set<std::string>& excluded_devices) override;
  double predict_period_s(const PipelineSpec& spec, const Characteristics& c) override;
  double predict_score(const PipelineSpec& spec, const Characteristics& c, const std::string& mode) override;

  // The scheduler's plan over every shape (flat and layer-recurrent), as if the FPGAs held
  // `images` when given. Throws sched::InfeasibleError when there is none.
  sched::Plan solve(const Characteristics& c, const sched::ObjectiveSpec& objective,
                    const std::set<std::string>& excluded, const FpgaImagePlan* images = nullptr) const;
  const hw::System& system() const { return system_; }
  // One device's time for one kernel shape, from the models this planner plans with.
  double predict_kernel_s(const hw::Device& d, const kernels::OpShape& shape) const { return kernel_time_(d, shape); }

  // The scheduler's inputs for these characteristics (kinds = schedulable devices not excluded).
  // `images`: plan as if the FPGAs held these images (image choice; planning_kinds.h).
  sched::SystemSpec system_spec(const std::set<std::string>& excluded, const FpgaImagePlan* images = nullptr) const;
  RuntimeCostModel cost_model(const sched::SystemSpec& spec, const Characteristics& c,
                              const std::set<std::string>& excluded = {}, const FpgaImagePlan* images = nullptr) const;

 protected:
  // The plan `spec` stands for, costed for `c` (period kInf when a kind is gone).
  sched::Plan evaluate(const PipelineSpec& spec, const Characteristics& c) const;
  // Where single-kernel times come from (subclasses: fitted performance models).
  void set_kernel_time(KernelTimeFn fn) { kernel_time_ = std::move(fn); }

 private:
  const Model& model_;
  const hw::System& system_;
  sched::SolverKind solver_;
  KernelTimeFn kernel_time_;
};

// The hw::System as the scheduler sees it: one kind per planning kind (planning_kinds.h: device
// kind, FPGAs split by image when they hold different ones) with schedulable devices not in
// `excluded` (count, power states of its first device, link from the topology).
sched::SystemSpec scheduler_system_spec(const hw::System& system, const std::set<std::string>& excluded,
                                        const FpgaImagePlan* images = nullptr);

// One device's time for a kernel from its device model (modelled); kInf when it cannot run it.
double modelled_kernel_time_s(const hw::System& system, const hw::Device& device,
                              const kernels::OpShape& shape);

// The layer-recurrent shapes the model's step chain allows (scheduler/recurrent.h).
std::vector<sched::Shape> recurrent_shapes(const Model& model);

// sched::Plan -> concrete devices (a recurrent plan unrolled into its rounds, PipelineSpec::rounds): stage s gets `count` devices of its kind, in system order,
// skipping excluded ones. Throws Error when the system has too few.
PipelineSpec to_pipeline_spec(const sched::Plan& plan, const hw::System& system,
                              const std::set<std::string>& excluded, const FpgaImagePlan* images = nullptr);

}  // namespace dype::rt
