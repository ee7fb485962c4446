// The measured model store shipped for the NVIDIA H200 (configs/perfmodels/nvidia-h200.json): it
// loads under the id of the H200's device profile, where the planner looks for it; its coefficients
// are what fitting its own stored samples gives (nothing set by hand); and the planner prices a
// device with that profile id from it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "hw/system.h"
#include "hw/system_config.h"
#include "perfmodel/model_store.h"
#include "runtime/planning/perf_planner.h"
#include "../test_temp_dir.h"

namespace dype {
namespace {

namespace fs = std::filesystem;
using kernels::OpKind;

const std::string kPerfmodels = std::string(DYPE_SOURCE_DIR) + "/configs/perfmodels";

TEST(ShippedPerfModels, H200StoreIsMeasuredAndItsCoefficientsComeFromItsSamples) {
  const perf::ModelStore st = perf::ModelStore::load(kPerfmodels + "/nvidia-h200.json", "nvidia-h200");
  EXPECT_EQ(st.device_class, perf::DeviceClass::gpu);
  EXPECT_EQ(st.provenance, "measured");
  const perf::KernelModel& spmm = st.at(OpKind::spmm);
  EXPECT_EQ(spmm.features->id, "spmm.gpu.v4");
  EXPECT_EQ(spmm.params.llc_bytes, 62914560.0);  // the H200's 60 MiB L2 (cudaDeviceProp::l2CacheSize)
  EXPECT_EQ(spmm.samples.size(), 598u);
  EXPECT_EQ(st.at(OpKind::gemm).samples.size(), 782u);
  for (OpKind kind : {OpKind::spmm, OpKind::gemm}) {
    const perf::KernelModel& m = st.at(kind);
    std::vector<perf::Sample> samples;
    for (const auto& s : m.samples) samples.push_back({s.shape, s.seconds});
    const perf::FitResult fit = perf::fit_model(*m.features, m.params, samples);
    ASSERT_EQ(fit.coefficients.size(), m.coefficients.size());
    for (std::size_t i = 0; i < m.coefficients.size(); ++i)
      EXPECT_NEAR(fit.coefficients[i], m.coefficients[i], 1e-9 * std::abs(m.coefficients[i]) + 1e-30)
          << kernels::to_string(kind) << " " << m.features->names[i];
    EXPECT_NEAR(fit.stats.mape_holdout, m.stats.mape_holdout, 1e-9);
    for (std::size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(fit.is_holdout[i], m.samples[i].holdout);
  }
  EXPECT_LT(spmm.stats.mape_holdout, 0.10);  // 8.8% (spmm.gpu.v3 on the same split: 11.4%)
}

// A system whose GPU's device profile is `nvidia-h200` (the id a detected H200 gets: the product
// name lowercased, non-alphanumerics as '-'): the planner's store lookup finds the shipped file.
TEST(ShippedPerfModels, PlannerLoadsTheH200StoreByProfileId) {
  const fs::path dir = test::process_temp_dir("dype_shipped_h200");
  fs::create_directories(dir / "devices");
  const auto read = [](const fs::path& p) {
    std::stringstream b;
    b << std::ifstream(p).rdbuf();
    return b.str();
  };
  const fs::path configs = fs::path(DYPE_SOURCE_DIR) / "configs";
  std::string gpu = read(configs / "devices" / "amd-mi210.yaml");
  gpu = std::regex_replace(gpu, std::regex("id: amd-mi210"), "id: nvidia-h200");
  std::ofstream(dir / "devices" / "nvidia-h200.yaml") << gpu;
  std::ofstream(dir / "devices" / "generic-cpu.yaml") << read(configs / "devices" / "generic-cpu.yaml");
  std::ofstream(dir / "system.yaml")
      << "system: {name: h200-check}\ntopology: {sockets: 1}\ndevices:\n"
         "  - {name: cpu0, backend: cpu, model: devices/generic-cpu.yaml, socket: 0, schedulable: false}\n"
         "  - {name: gpu0, backend: emu, model: devices/nvidia-h200.yaml, socket: 0}\n";
  const hw::System sys = hw::System::from_config(hw::load_system_config((dir / "system.yaml").string()));
  const auto stores = rt::PerfModelPlanner::stores_for(sys, kPerfmodels);
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores[0].device_model, "nvidia-h200");
  EXPECT_EQ(stores[0].at(OpKind::spmm).features->id, "spmm.gpu.v4");
}

}  // namespace
}  // namespace dype
