#pragma once
// One planning question asked of the files an operator has: a system file, a model config and an
// input's characteristics, planned with every FPGA image assignment tried (image_choice.h). The
// one place that turns files into plans, shared by `dype-schedule` and `dype-eval`, so both plan
// exactly as each other (and, with the runtime cost model, as `dype-serve`).
//
//   rt::PlanningCase c({.system_file = "configs/systems/paper-testbed-pcie4.yaml", .model = cfg,
//                       .input = {.nodes = 169343, .nnz = 1166243, .feature_len = 128}});
//   rt::CasePlan perf = c.plan({.objective = sched::Objective::perf});
//   rt::CasePlan gpu  = c.plan({.objective = sched::Objective::perf}, sched::SolverKind::exact, "gpu-only");
//   c.inputs(perf.assignment).system;  // the system the plan was made for (its images)
//
// The systems of every assignment are loaded once, when the case is built; each plan() solves
// over all of them. Everything is modelled.
#include <optional>
#include <string>
#include <vector>

#include "runtime/planning/image_choice.h"
#include "runtime/planning/schedule_inputs.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"

namespace dype::rt {

struct CaseSpec {
  std::string system_file;
  sched::ModelConfig model;
  sched::InputCharacteristics input;
  std::string perfmodels_dir;                        // "" = the devices' own models
  CostModelChoice cost_model = CostModelChoice::runtime;
  std::optional<sched::TransferMode> transfers;      // nullopt = as the system file says
  bool choose_images = true;                         // false = keep the images the file loads
  bool flat_only = false;                            // true = no layer-recurrent shapes
  double reload_horizon = 1000;                      // requests an image reload is amortised over
};

struct CasePlan {
  sched::Plan plan;
  std::size_t assignment = 0;  // index into PlanningCase::inputs()
  std::string image_note;      // which images on which FPGAs and what reloading them costs; "" = none
};

class PlanningCase {
 public:
  // Throws InputError (bad files or characteristics) as load_schedule_inputs does.
  explicit PlanningCase(CaseSpec spec);

  // The best plan for the objective over every image assignment (`baseline`: one of
  // sched::baseline_names() instead of DyPe's plan). Throws sched::InfeasibleError when no
  // assignment has a plan, InputError for an unknown baseline.
  CasePlan plan(const sched::ObjectiveSpec& objective, sched::SolverKind solver = sched::SolverKind::exact,
                const std::string& baseline = "") const;

  // The system and cost model of assignment i; loaded(): the images the file loads.
  const ScheduleInputs& inputs(std::size_t i) const { return systems_.at(i); }
  const ScheduleInputs& loaded() const { return systems_.at(loaded_); }
  std::size_t assignments() const { return systems_.size(); }
  const std::vector<sched::Shape>& shapes() const { return shapes_; }
  const CaseSpec& spec() const { return spec_; }

 private:
  // score_limit (DyPe's plans only): nullopt when no plan of assignment i scores at most it
  // (sched::solve_shapes' score_limit).
  std::optional<sched::Plan> plan_on(std::size_t i, const sched::ObjectiveSpec& objective, sched::SolverKind solver,
                                     const std::string& baseline, double score_limit = sched::kInf) const;

  CaseSpec spec_;
  FpgaImages images_;
  std::vector<ImageAssignment> assignments_;  // empty: one system, as loaded
  std::vector<ScheduleInputs> systems_;       // one per assignment, in image_assignments() order
  std::size_t loaded_ = 0;
  std::vector<sched::Shape> shapes_;
};

}  // namespace dype::rt
