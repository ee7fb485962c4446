#pragma once
// Planner: how the runtime asks for a plan. SchedPlanner is the adapter onto the DyPe scheduler
// (scheduler/solver.h): it describes the hw::System to the scheduler as device kinds with counts,
// power and links (sched::SystemSpec), times every kernel of the model on one device of each kind
// for the given characteristics (the emulated device model's time, i.e. modelled), solves for the
// objective (perf | energy | balanced | qos), and turns the sched::Plan's (kind, count) stages
// into concrete devices. Devices marked failed are left out.
//
//   auto planner = std::make_shared<rt::SchedPlanner>(model, system);
//   rt::PlannedPipeline p = planner->plan(req.characteristics(), "balanced", {});
//   std::cout << p.mnemonic << " " << rt::describe(p.spec);
#include <memory>
#include <set>
#include <string>

#include "hw/system.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "scheduler/solver.h"

namespace dype::rt {

struct PlannedPipeline {
  PipelineSpec spec;
  std::string mnemonic;         // "3F2G"
  double period_s = 0.0;        // predicted (modelled)
  double energy_j = 0.0;        // predicted per inference (modelled)
};

class Planner {
 public:
  virtual ~Planner() = default;
  // Throws dype::Error (sched::InfeasibleError, or when no device can run a kernel).
  virtual PlannedPipeline plan(const Characteristics& c, const std::string& mode,
                               const std::set<std::string>& excluded_devices) = 0;
  // Predicted period of an existing pipeline under (possibly new) characteristics.
  virtual double predict_period_s(const PipelineSpec& spec, const Characteristics& c) = 0;
};

class SchedPlanner : public Planner {
 public:
  SchedPlanner(const Model& model, const hw::System& system,
               sched::SolverKind solver = sched::SolverKind::exact);
  PlannedPipeline plan(const Characteristics& c, const std::string& mode,
                       const std::set<std::string>& excluded_devices) override;
  double predict_period_s(const PipelineSpec& spec, const Characteristics& c) override;

  // The scheduler's inputs for these characteristics (kinds = schedulable devices not excluded).
  sched::SystemSpec system_spec(const std::set<std::string>& excluded) const;
  sched::AdditiveCostModel cost_model(const sched::SystemSpec& spec, const Characteristics& c) const;

 private:
  const Model& model_;
  const hw::System& system_;
  sched::SolverKind solver_;
};

// The hw::System as the scheduler sees it: one kind per device kind with schedulable devices not
// in `excluded` (count, power states of its first device, link from the topology).
sched::SystemSpec scheduler_system_spec(const hw::System& system, const std::set<std::string>& excluded);

// One device's time for a kernel from its device model (modelled); kInf when it cannot run it.
double modelled_kernel_time_s(const hw::System& system, const hw::Device& device,
                              const kernels::OpShape& shape);

// sched::Plan -> concrete devices: stage s gets `count` devices of its kind, in system order,
// skipping excluded ones. Throws Error when the system has too few.
PipelineSpec to_pipeline_spec(const sched::Plan& plan, const hw::System& system,
                              const std::set<std::string>& excluded);

}  // namespace dype::rt
