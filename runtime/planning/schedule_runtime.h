#pragma once
// The runtime cost model behind dype-schedule (schedule_inputs.h, CostModelChoice::runtime): the
// model config read as the runtime model it stands for, priced by rt::RuntimeCostModel on the
// system file's devices with the planner dype-serve would build (fitted performance models where
// the folder has them), so dype-schedule says what the daemon will do.
//
//   auto spec = rt::runtime_model_spec(sched::load_model_config("configs/models/gcn.yaml"), in);
//   rt::ScheduleInputs si = rt::runtime_schedule_inputs("configs/systems/paper-testbed-pcie4.yaml", *spec, in, "", ...);
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hw/system.h"
#include "hw/system_config.h"
#include "perfmodel/model_store.h"
#include "runtime/planning/image_choice.h"
#include "runtime/model.h"
#include "runtime/planning/planner.h"
#include "scheduler/cost_model.h"
#include "scheduler/system.h"
#include "scheduler/workload.h"

namespace dype::rt {

// The system, model and planner a runtime cost model prices against.
struct RuntimeParts {
  std::unique_ptr<hw::System> system;
  std::unique_ptr<Model> model;
  std::shared_ptr<SchedPlanner> planner;  // a PerfModelPlanner when fitted models were found
};

// Everything a scheduler solve needs (schedule_inputs.h loads it from an operator's files).
struct ScheduleInputs {
  sched::SystemSpec system;
  sched::Workload workload;
  std::shared_ptr<RuntimeParts> runtime;    // before `model`, which refers to it
  std::unique_ptr<sched::CostModel> model;
  std::string cost_source;  // where kernel times come from, for reports
};

// The system file's baseline pins (`baselines:`) on `spec`: an op pinned to "fpga" goes to the
// first FPGA image kind `supports(kind, op)` says runs it when the FPGA kind is split by image
// (schedule_inputs.cpp; shared by both cost models).
void apply_baselines(const hw::SystemConfig& cfg, sched::SystemSpec& spec,
                     const std::function<bool(int, kernels::OpKind)>& supports);

// Inputs priced by the runtime's cost model. `assignment` (with `images`): as if the FPGAs held
// those images (assign_images: an FPGA keeps an image it holds), timed from their manifests.
ScheduleInputs runtime_schedule_inputs(const std::string& system_file, const ModelSpec& spec,
                                       const sched::InputCharacteristics& input, const std::string& perfmodels_dir,
                                       const FpgaImages* images, const ImageAssignment* assignment,
                                       sched::Workload workload);

// The runtime model a config stands for (timing-only weights), when its kernel chain is one the
// runtime runs with the same kernels and widths; nullopt otherwise .
std::optional<ModelSpec> runtime_model_spec(const sched::ModelConfig& config, const sched::InputCharacteristics& input);

}  // namespace dype::rt
