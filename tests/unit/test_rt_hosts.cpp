// Systems that span hosts (hw::SystemConfig::hosts) as the planner sees them: another host's
// devices are their own kinds ("gpu@b", lower-case letters), the scheduler gets the hosts' NICs,
// a hand-off to another host costs its NIC legs through this machine, plans name the devices they
// run on, and bad host settings are refused naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hw/system.h"
#include "hw/system_config.h"
#include "kernels/error.h"
#include "runtime/model.h"
#include "runtime/planner.h"
#include "runtime/planning_kinds.h"
#include "../test_temp_dir.h"

namespace dype::rt {
namespace {

namespace fs = std::filesystem;

std::string dev(const std::string& name, const std::string& kind, const std::string& host,
                const std::string& image = "u280-sextans-gemm.yaml") {
  const std::string dir = std::string(DYPE_SOURCE_DIR) + "/configs";
  std::string y = "  - {name: " + name + ", backend: emu, socket: 0, p2p: true";
  y += kind == "gpu" ? ", model: " + dir + "/devices/amd-mi210.yaml"
                     : ", model: " + dir + "/devices/xilinx-u280.yaml, bitstream: " + dir + "/bitstreams/" + image;
  if (!host.empty()) y += ", host: " + host;
  return y + "}\n";
}

fs::path write_system(const std::string& body) {
  static int n = 0;
  const fs::path p = dype::test::process_temp_dir("rt_hosts") / ("system-" + std::to_string(n++) + ".yaml");
  std::ofstream(p) << "system: {name: hosts-test}\n" << body;
  return p;
}

const std::string kHosts =
    "hosts:\n  - {name: here}\n  - {name: b, address: \"10.0.0.2:7100\", nic_gbit_per_s: 10, nic_latency_us: 5}\n";

std::string refusal(const std::string& body) {
  try {
    hw::load_system_config(write_system(body).string());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(RtHosts, AnotherHostsDevicesAreTheirOwnKindsWithTheNics) {
  const auto cfg = hw::load_system_config(
      write_system(kHosts + "devices:\n" + dev("gpu0", "gpu", "") + dev("gpu1", "gpu", "b") + dev("fpga0", "fpga", "b")).string());
  ASSERT_EQ(cfg.hosts.size(), 2u);
  EXPECT_EQ(cfg.hosts[1].address, "10.0.0.2:7100");
  EXPECT_DOUBLE_EQ(cfg.hosts[1].nic_bytes_per_s, 10e9 / 8);
  EXPECT_EQ(cfg.remote_host("gpu0"), "");
  EXPECT_EQ(cfg.remote_host("gpu1"), "b");
  const auto sys = hw::System::from_config(cfg);
  EXPECT_EQ(planning_kind_name(sys, *sys.find("gpu0")), "gpu");
  EXPECT_EQ(planning_kind_name(sys, *sys.find("gpu1")), "gpu@b");
  EXPECT_EQ(device_kind_of("fpga:u280-sextans-gemm@b"), hw::DeviceKind::fpga);
  EXPECT_EQ(host_of_kind("fpga@b"), "b");
  const sched::SystemSpec spec = scheduler_system_spec(sys, {});
  ASSERT_EQ(spec.hosts.size(), 2u);
  const int far = spec.kind_index("gpu@b");
  ASSERT_GE(far, 0);
  EXPECT_EQ(spec.kinds[static_cast<std::size_t>(far)].host_index, 1);
  EXPECT_EQ(spec.kinds[static_cast<std::size_t>(far)].letter, 'g');
  EXPECT_EQ(spec.kinds[static_cast<std::size_t>(spec.kind_index("gpu"))].letter, 'G');
}

TEST(RtHosts, AHandOffToAnotherHostCostsItsNicLegs) {
  const auto sys = hw::System::from_config(hw::load_system_config(
      write_system(kHosts + "devices:\n" + dev("gpu0", "gpu", "") + dev("gpu1", "gpu", "") + dev("gpu2", "gpu", "b")).string()));
  const Model m = Model::gcn({.layers = 2, .in_features = 64, .hidden = 64, .seed = 1});
  SchedPlanner planner(m, sys);
  const auto spec = planner.system_spec({});
  Characteristics c;
  c.nodes = 4096;
  c.nnz = 40000;
  c.feature_len = 64;
  const RuntimeCostModel cm = planner.cost_model(spec, c, {});
  const int here = spec.kind_index("gpu"), far = spec.kind_index("gpu@b");
  const double bytes = cm.output_bytes(1);
  const double local = cm.transfer_in_s(1, {here, 1}, {here, 1});
  const double remote = cm.transfer_in_s(1, {here, 1}, {far, 1});
  // 1 MiB over a 10 Gb/s NIC: ~0.84 ms on top of the device legs.
  EXPECT_GE(remote - local, bytes / (10e9 / 8) * 0.9);
  EXPECT_GT(cm.host_input_s({far, 1}), cm.host_input_s({here, 1}) + 4096 * 64 * 4 / (10e9 / 8) * 0.9);
}

TEST(RtHosts, PlansOnAnotherHostNameItsDevices) {
  const auto sys = hw::System::from_config(hw::load_system_config(
      write_system(kHosts + "devices:\n" + dev("fpga0", "fpga", "", "u280-sextans-swat.yaml") + dev("gpu0", "gpu", "b") + dev("gpu1", "gpu", "b")).string()));
  const Model m = Model::gcn({.layers = 2, .in_features = 64, .hidden = 64, .seed = 1});
  SchedPlanner planner(m, sys);
  Characteristics c;
  c.nodes = 2000;
  c.nnz = 20000;
  c.feature_len = 64;
  const PlannedPipeline p = planner.plan(c, "perf", {});
  bool remote = false;
  for (const auto& st : p.spec.stages)
    for (hw::Device* d : st.devices) remote |= sys.config().remote_host(d->name()) == "b";
  EXPECT_TRUE(remote) << p.mnemonic << " " << describe(p.spec) << ": only host b's GPUs run GEMMs (this host's FPGA holds the SpMM + attention image)";
  EXPECT_NE(p.mnemonic.find('g'), std::string::npos) << p.mnemonic;
}

TEST(RtHosts, BadHostSettingsAreRefusedNamingTheKey) {
  EXPECT_NE(refusal(kHosts + "devices:\n" + dev("gpu0", "gpu", "c")).find("devices[0].host: no host named 'c' in hosts"),
            std::string::npos);
  EXPECT_NE(refusal("hosts:\n  - {name: here}\n  - {name: b}\ndevices:\n" + dev("gpu0", "gpu", "")).find("hosts[1].address"),
            std::string::npos);
  EXPECT_NE(refusal("hosts:\n  - {name: here}\n  - {name: b, address: nowhere}\ndevices:\n" + dev("gpu0", "gpu", ""))
                .find("must be HOST:PORT, got 'nowhere'"),
            std::string::npos);
  EXPECT_NE(refusal("hosts:\n  - {name: here}\n  - {name: here, address: \"x:1\"}\ndevices:\n" + dev("gpu0", "gpu", ""))
                .find("duplicate host name 'here'"),
            std::string::npos);
  EXPECT_NE(refusal("devices:\n" + dev("gpu0", "gpu", "b")).find("the system lists no hosts"), std::string::npos);
  // A device on another host is planned from its model file: required.
  EXPECT_NE(refusal(kHosts + "devices:\n  - {name: gpu9, backend: cuda, host: b}\n").find("model"), std::string::npos);
}

}  // namespace
}  // namespace dype::rt
