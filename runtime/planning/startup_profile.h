#pragma once
// The performance-model stores a daemon plans with, one per device model (profile id), and where
// each came from. For every device model of the system, in order:
//   1. <perfmodels dir>/<id>.json: a fitted store (dype-profile run, or shipped in
//      configs/perfmodels/). A store fitted on an emulated device is not used for a real one;
//   2. <state dir>/perfmodels/<id>.json: the start-up measurement an earlier start kept;
//   3. a start-up measurement: a real accelerator with neither is timed now on a small set of SpMM,
//      GEMM and window-attention shapes (perf::profile_device, within `budget_s`), fitted, and kept
//      in the state dir under its id, so the next start reuses it at once. Online refinement then
//      goes on from it as from any fitted store.
// Without any of them a device is planned from its device profile's roofline, and says so
// (runtime/planning/device_planning.h).
//
//   auto stores = load_planning_stores(system, {.perfmodels_dir = "configs/perfmodels",
//                                               .state_dir = "/var/lib/dype", .budget_s = 20});
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hw/system.h"
#include "perfmodel/model_store.h"

namespace dype::rt {

struct StoreOrigin {
  enum class Kind { fitted, startup_measured, startup_reused };
  Kind kind = Kind::fitted;
  std::string path;  // the file it was read from or kept in ("" when not kept: no state dir)
};
std::string describe(const StoreOrigin& origin);  // "fitted (configs/perfmodels/nvidia-h200.json)"

struct StartupProfileOptions {
  std::string perfmodels_dir = "";  // no fitted stores when empty
  std::string state_dir = "";       // empty: start-up measurements are not kept across restarts
  double budget_s = 20;        // per device model; 0 turns the start-up measurement off
  // Which devices are measured: real accelerators by default. Emulated devices are planned from
  // their own (exact) device models and the CPU from its profile; tests and operators may add them.
  bool measure_modelled = false;
  bool measure_cpu = false;
  std::function<void(const std::string&)> log = nullptr;  // progress lines (none when unset)
};

struct PlanningStores {
  std::vector<perf::ModelStore> stores;
  std::map<std::string, StoreOrigin> origin;  // by device model id
  std::vector<std::string> warnings;          // what could not be used or measured, and why
};

// Reads, reuses or measures as above. A kept store that cannot be read is measured again, and a
// measurement that fails is a warning (the device falls back to its profile). InputError for a
// perfmodels dir that is not a directory, a damaged fitted store in it (naming the file), or a
// state dir that cannot be written.
PlanningStores load_planning_stores(const hw::System& system, const StartupProfileOptions& options);

}  // namespace dype::rt
