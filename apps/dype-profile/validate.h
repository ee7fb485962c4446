#pragma once
// dype-profile validate: SpMM on a real graph the fit never saw, timed on the device, beside each
// model's prediction, and the error left after online refinement has seen a few requests; or, with
// times measured elsewhere (--measured), each model's prediction beside them, no device needed.
#include <cstdint>
#include <string>
#include <vector>

#include "hw/device.h"
#include "common/csr.h"
#include "perfmodel/measured_times.h"
#include "perfmodel/model_store.h"
#include "perfmodel/profiler.h"

namespace dype::profile_app {

struct ValidateOptions {
  std::vector<std::int64_t> feature_lens = {16, 32, 64, 128, 256, 512};
  int rounds = 3;           // timings per N, interleaved; the median is the measured time
  int refine_requests = 5;  // requests fed to online refinement (one launch per N each)
  perf::ProfileClock clock = perf::ProfileClock::wall;
  // --save-measured: the measured times are also written here as N,measured_ms (the CSV --measured
  // reads), so a machine without the device can check a store against them later. "": not written.
  std::string save_measured_csv = "";
};

// Prints the graph's characteristics, then per N the measured time and each store's prediction,
// then MAPE per store, fitted and after refinement. `names` label the stores' columns.
void validate_graph(hw::Device& device, const kernels::CsrI32& graph, const std::string& graph_name,
                    const std::vector<perf::ModelStore>& stores, const std::vector<std::string>& names,
                    const ValidateOptions& options);

// Prints the graph's characteristics, then per measured N the measured time and each store's
// prediction, then each store's MAPE on the graph; returns those MAPEs (fractions), one per store.
std::vector<double> validate_measured(const kernels::CsrI32& graph, const std::string& graph_name,
                                      const std::vector<perf::MeasuredTime>& measured, const std::string& source,
                                      const std::vector<perf::ModelStore>& stores, const std::vector<std::string>& names);

}  // namespace dype::profile_app
