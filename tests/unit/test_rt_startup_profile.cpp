// The daemon's start-up measurement (runtime/planning/startup_profile.h): a device model with no fitted store
// is timed at start, fitted, kept in the state dir under its profile id and reused by the next
// start; a fitted store wins; a store fitted on an emulated device is not used for a real one. And
// what each device then says it is planned with (runtime/planning/device_planning.h).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "hw/system_file.h"
#include "runtime/planning/device_planning.h"
#include "runtime/planning/startup_profile.h"
#include "test_rt_common.h"
#include "../test_temp_dir.h"

namespace dype::rt {
namespace {

namespace fs = std::filesystem;
using kernels::OpKind;

fs::path fresh_dir(const std::string& tag) {
  const fs::path d = test::process_temp_dir("dype-startup") / tag;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

hw::System host_cpu() {
  hw::SystemConfig cfg = hw::load_system_config(testing::configs_dir() + "/systems/local.yaml");
  cfg.devices[0].threads = 2;
  return hw::System::from_config(cfg);
}

const DevicePlanning& planning_of(const std::vector<DevicePlanning>& all, const std::string& device) {
  for (const auto& p : all)
    if (p.device == device) return p;
  throw Error("no planning for " + device);
}

TEST(RtStartupProfile, EmulatedGpuIsMeasuredKeptAndReused) {
  const fs::path state = fresh_dir("emu");
  hw::System sys = testing::emu_system(1, 0, /*timing_only=*/true);
  StartupProfileOptions o{.state_dir = state.string(), .budget_s = 3, .measure_modelled = true};
  const PlanningStores first = load_planning_stores(sys, o);
  ASSERT_EQ(first.origin.count("amd-mi210"), 1u) << (first.warnings.empty() ? "" : first.warnings[0]);
  EXPECT_EQ(first.origin.at("amd-mi210").kind, StoreOrigin::Kind::startup_measured);
  const fs::path kept = state / "perfmodels" / "amd-mi210.json";
  ASSERT_TRUE(fs::exists(kept));
  ASSERT_EQ(first.stores.size(), 1u);
  EXPECT_NE(first.stores[0].find(OpKind::spmm), nullptr);
  EXPECT_NE(first.stores[0].find(OpKind::gemm), nullptr);
  EXPECT_EQ(first.stores[0].provenance, "modelled");

  const auto t0 = std::chrono::steady_clock::now();
  const PlanningStores second = load_planning_stores(sys, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 1.0);  // read, not measured again
  EXPECT_EQ(second.origin.at("amd-mi210").kind, StoreOrigin::Kind::startup_reused);
  EXPECT_EQ(second.origin.at("amd-mi210").path, kept.string());
  ASSERT_EQ(second.stores.size(), 1u);
  const auto* a = first.stores[0].find(OpKind::gemm);
  const auto* b = second.stores[0].find(OpKind::gemm);
  kernels::OpShape s{.kind = OpKind::gemm, .m = 4096, .k = 128, .n = 128};
  EXPECT_DOUBLE_EQ(a->predict(s).seconds, b->predict(s).seconds);

  // The planning it says: gemm and spmm from the kept measurement.
  const auto planning = describe_device_planning(sys, second);
  const DevicePlanning& gpu = planning_of(planning, "gpu0");
  EXPECT_TRUE(gpu.planned);
  EXPECT_NE(gpu.kernel_times.at("spmm").find("start-up measurement of an earlier start"), std::string::npos)
      << gpu.summary();
  EXPECT_NE(gpu.kernel_times.at("softmax").find("device model"), std::string::npos) << gpu.summary();

  // A fitted store in the perfmodels folder wins over the kept one.
  const fs::path fitted = fresh_dir("emu-fitted");
  fs::copy_file(kept, fitted / "amd-mi210.json");
  o.perfmodels_dir = fitted.string();
  const PlanningStores third = load_planning_stores(sys, o);
  EXPECT_EQ(third.origin.at("amd-mi210").kind, StoreOrigin::Kind::fitted);
}

TEST(RtStartupProfile, HostCpuIsMeasuredWhenAskedAndNotOtherwise) {
  const fs::path state = fresh_dir("cpu");
  hw::System sys = host_cpu();
  // By default only real accelerators are measured: the CPU is planned from its profile.
  const PlanningStores none = load_planning_stores(sys, {.state_dir = state.string(), .budget_s = 8});
  EXPECT_TRUE(none.stores.empty());
  const auto planning = describe_device_planning(sys, none);
  EXPECT_NE(planning_of(planning, "cpu0").kernel_times.at("gemm").find("device profile roofline (generic-cpu)"),
            std::string::npos);

  StartupProfileOptions o{.state_dir = state.string(), .budget_s = 8, .measure_cpu = true};
  const PlanningStores first = load_planning_stores(sys, o);
  ASSERT_EQ(first.stores.size(), 1u) << (first.warnings.empty() ? "" : first.warnings[0]);
  EXPECT_EQ(first.stores[0].provenance, "measured");
  EXPECT_NE(first.stores[0].find(OpKind::gemm), nullptr);
  EXPECT_EQ(first.origin.at("generic-cpu").kind, StoreOrigin::Kind::startup_measured);
  EXPECT_TRUE(fs::exists(state / "perfmodels" / "generic-cpu.json"));
  const PlanningStores second = load_planning_stores(sys, o);
  EXPECT_EQ(second.origin.at("generic-cpu").kind, StoreOrigin::Kind::startup_reused);

  // A store fitted on an emulated device is not a measurement of a real one: it is set aside.
  const fs::path fitted = fresh_dir("cpu-fitted");
  perf::ModelStore modelled = second.stores[0];
  modelled.provenance = "modelled";
  modelled.save(fitted / "generic-cpu.json");
  o.perfmodels_dir = fitted.string();
  const PlanningStores third = load_planning_stores(sys, o);
  ASSERT_FALSE(third.warnings.empty());
  EXPECT_NE(third.warnings[0].find("fitted on an emulated generic-cpu"), std::string::npos) << third.warnings[0];
  EXPECT_EQ(third.origin.at("generic-cpu").kind, StoreOrigin::Kind::startup_reused);
}

TEST(RtStartupProfile, ZeroBudgetMeasuresNothing) {
  hw::System sys = testing::emu_system(1, 0, true);
  const PlanningStores s = load_planning_stores(sys, {.budget_s = 0, .measure_modelled = true});
  EXPECT_TRUE(s.stores.empty());
  EXPECT_TRUE(s.warnings.empty());
}

TEST(RtStartupProfile, BadPerfmodelsFolderIsNamed) {
  hw::System sys = testing::emu_system(1, 0, true);
  try {
    load_planning_stores(sys, {.perfmodels_dir = "/nonexistent/perfmodels"});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/perfmodels"), std::string::npos);
  }
}

TEST(RtDevicePlanning, ADeviceThatCannotBeTimedIsAWarningThatSaysWhatIsMissing) {
  hw::SystemConfig cfg;
  cfg.name = "bare";
  hw::DeviceConfig cpu;
  cpu.name = "cpu0";
  cpu.backend = "cpu";
  cpu.kind = hw::DeviceKind::cpu;
  cpu.link.type = hw::LinkType::host;
  cpu.schedulable = true;
  cpu.no_profile_why = "device attributes of 'x': memory size not reported";
  cfg.devices = {cpu};
  hw::System sys = hw::System::from_config(cfg);
  const auto planning = describe_device_planning(sys, {});
  const DevicePlanning& p = planning_of(planning, "cpu0");
  EXPECT_FALSE(p.planned);
  EXPECT_TRUE(p.warning);
  EXPECT_EQ(p.profile, "none");
  EXPECT_NE(p.why_not.find("no kernel times"), std::string::npos) << p.why_not;
  EXPECT_NE(p.why_not.find("memory size not reported"), std::string::npos) << p.why_not;
  EXPECT_NE(p.summary().find("cpu0: not planned"), std::string::npos) << p.summary();
  EXPECT_EQ(p.to_json()["planned"], false);
}

TEST(RtDevicePlanning, ProfileFromAFileSaysWhichFile) {
  hw::System sys = testing::emu_system(1, 1, true);
  const auto planning = describe_device_planning(sys, {});
  const DevicePlanning& gpu = planning_of(planning, "gpu0");
  EXPECT_TRUE(gpu.planned);
  EXPECT_NE(gpu.profile.find("amd-mi210 (file "), std::string::npos) << gpu.profile;
  EXPECT_NE(gpu.profile.find("devices/amd-mi210.yaml"), std::string::npos) << gpu.profile;
  const DevicePlanning& cpu = planning_of(planning, "cpu0");
  EXPECT_FALSE(cpu.planned);
  EXPECT_NE(cpu.why_not.find("schedulable: false"), std::string::npos);
}

}  // namespace
}  // namespace dype::rt
