// What bare dype-serve did wrong on an H200 host: it planned every model on the CPU, because a
// detected GPU had no device profile. Here a GPU with the profile detection derives from the H200's
// real attribute values (tests/data/devices/nvidia-h200-attributes.txt) stands beside the host CPU
// with its generic profile, as on that host. It is emulated (no GPU here), so its times are modelled,
// but the planner sees exactly what it sees for the detected H200: the profile id nvidia-h200, the
// profile's roofline, and the shipped fitted store under that id. A GCN 128 -> 128 -> 16 on a graph
// the size of the Debian dependency graph must go to the GPU, with and without the store.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "hw/detected_profile.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "runtime/planning/device_planning.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/startup_profile.h"
#include "../test_temp_dir.h"

namespace dype::rt {
namespace {

namespace fs = std::filesystem;

hw::System h200_host() {
  const std::string src = DYPE_SOURCE_DIR;
  std::ifstream in(src + "/tests/data/devices/nvidia-h200-attributes.txt");
  std::stringstream text;
  text << in.rdbuf();
  hw::AcceleratorAttributes a = hw::parse_attribute_dump(text.str(), "nvidia-h200-attributes.txt");
  a.pcie_generation = 5;  // what NVML reports on that host
  a.pcie_lanes = 16;
  const fs::path dir = test::process_temp_dir("dype_h200_host");
  std::ofstream(dir / "nvidia-h200.yaml") << hw::device_profile_yaml(hw::derive_device_profile(a));
  std::ofstream(dir / "host.yaml")
      << "system: {name: h200-host}\ntiming_only: true\ndevices:\n"
      << "  - {name: cpu0, backend: cpu, model: " << src << "/configs/devices/generic-cpu.yaml, schedulable: true}\n"
      << "  - {name: gpu0, backend: emu, model: " << (dir / "nvidia-h200.yaml").string() << "}\n";
  return hw::System::from_config(hw::load_system_config((dir / "host.yaml").string()));
}

Model gcn() {
  return Model::gcn({.layers = 2, .in_features = 128, .hidden = 128, .out_features = 16, .materialize_weights = false});
}

// 68,471 nodes, 304,032 edges made undirected plus self-loops (GCN's normalisation).
const Characteristics kDebian{.nodes = 68471, .nnz = 2 * 304032 + 68471, .feature_len = 128, .degree_skew = 300};

TEST(DetectedGpuPlanned, H200IsPlannedFromItsProfile) {
  hw::System sys = h200_host();
  const Model m = gcn();
  SchedPlanner planner(m, sys);
  for (const char* mode : {"perf", "balanced", "energy"}) {
    const PlannedPipeline p = planner.plan(kDebian, mode, {});
    EXPECT_NE(p.mnemonic.find('G'), std::string::npos) << mode << ": " << p.mnemonic;
  }
}

TEST(DetectedGpuPlanned, H200IsPlannedFromTheShippedStoreFoundByItsId) {
  hw::System sys = h200_host();
  const PlanningStores stores = load_planning_stores(
      sys, {.perfmodels_dir = std::string(DYPE_SOURCE_DIR) + "/configs/perfmodels", .budget_s = 0});
  ASSERT_EQ(stores.origin.count("nvidia-h200"), 1u);
  EXPECT_EQ(stores.origin.at("nvidia-h200").kind, StoreOrigin::Kind::fitted);
  const auto planning = describe_device_planning(sys, stores);
  for (const auto& p : planning) {
    EXPECT_TRUE(p.planned) << p.summary();
    if (p.device == "gpu0") {
      EXPECT_NE(p.kernel_times.at("spmm").find("configs/perfmodels/nvidia-h200.json"), std::string::npos) << p.summary();
      EXPECT_NE(p.profile.find("nvidia-h200"), std::string::npos);
    }
  }
  const Model m = gcn();
  PerfModelPlanner planner(m, sys, stores.stores);
  const PlannedPipeline p = planner.plan(kDebian, "balanced", {});
  EXPECT_NE(p.mnemonic.find('G'), std::string::npos) << p.mnemonic;
  EXPECT_NE(p.cost_source.find("fitted"), std::string::npos) << p.cost_source;
}

}  // namespace
}  // namespace dype::rt
