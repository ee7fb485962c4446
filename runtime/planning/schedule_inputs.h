#pragma once
// Everything a scheduler solve needs, from the files an operator has: a system file and a model
// config (configs/models/*.yaml) plus the input's characteristics. Used by `dype-schedule` and by
// the tests that check plans on the paper's testbed.
//
// Two system file formats are accepted:
//  - a device inventory (configs/systems/*.yaml, hw/system_config.h: `devices:`): each kind's
//    kernel times come from its first schedulable device's model (emulated device models:
//    Sextans/SWAT formulas for the U280, roofline for the MI210), links from the topology;
//  - a scheduler-only description (scheduler/system.h, `kinds:` with effective GFLOP/s per op):
//    kernel times from the kinds' GFLOP/s (a rough roofline).
// Either way every time is a prediction (modelled).
//
//   auto in = rt::load_schedule_inputs("configs/systems/paper-testbed-pcie4.yaml",
//                                      "configs/models/gcn.yaml", {.nodes = 230000, ...});
//   sched::Plan p = sched::solve(in.system, *in.model, {.objective = sched::Objective::perf});
#include <memory>
#include <optional>
#include <string>

#include "runtime/planning/image_choice.h"
#include "runtime/planning/schedule_runtime.h"
#include "runtime/model.h"
#include "scheduler/cost_model.h"
#include "scheduler/system.h"
#include "scheduler/workload.h"

namespace dype::rt {

// Which cost model prices the plans of a device inventory:
//  - runtime: rt::RuntimeCostModel, what dype-serve plans with (shard kernel times, host I/O at
//    the ends, each side of a hand-off as the transfer engine does it), for model configs whose
//    kernel chain is one the runtime runs (GCN, GIN, SAGE, the bare transformer block); other
//    configs fall back to additive, and cost_source says so;
//  - additive: sched::AdditiveCostModel, the paper's Algorithm 1 cost model (kernel times summed,
//    an all-gather before a multi-device SpMM, one transfer time X charged to both stages).
enum class CostModelChoice { additive, runtime };

// Throws InputError naming the file and key (or the characteristic) on bad input.
// perfmodels_dir: for a device inventory, kernel times come from the fitted performance models
// found there (<device model>.json from dype-profile) where they cover the kernel, the device
// models otherwise; empty: device models only.
ScheduleInputs load_schedule_inputs(const std::string& system_file, const std::string& model_file,
                                    const sched::InputCharacteristics& input, const std::string& perfmodels_dir = "");

// Same, with the model config already parsed. `assignment` (image_choice.h; device inventories
// only): the FPGA kind becomes one kind per image given FPGAs (`fpga:<image>`), timed from the
// image's manifest (modelled); null: the images the file loads.
ScheduleInputs load_schedule_inputs(const std::string& system_file, const sched::ModelConfig& model,
                                    const sched::InputCharacteristics& input, const std::string& perfmodels_dir = "",
                                    const FpgaImages* images = nullptr, const ImageAssignment* assignment = nullptr,
                                    CostModelChoice cost_model = CostModelChoice::additive);

}  // namespace dype::rt
