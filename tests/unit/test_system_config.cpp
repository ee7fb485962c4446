// System config loading and validation: every shipped file loads; bad files fail with the exact
// key path of the problem.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "../test_temp_dir.h"

#include "hw/system.h"
#include "hw/system_config.h"
#include "common/error.h"

namespace {

namespace fs = std::filesystem;
using dype::hw::DeviceKind;
using dype::hw::load_system_config;

std::string configs() { return std::string(DYPE_SOURCE_DIR) + "/configs"; }

// Writes a system file into a temporary configs/systems folder that sees the real device models.
std::string write_system(const std::string& name, const std::string& text) {
  const fs::path dir = dype::test::process_temp_dir("dype_test_system_config") / "systems";
  fs::create_directories(dir);
  fs::create_directories(dir.parent_path() / "devices");
  fs::create_directories(dir.parent_path() / "bitstreams");
  for (const char* sub : {"devices", "bitstreams"}) {
    for (const auto& f : fs::directory_iterator(configs() + "/" + sub)) {
      fs::copy_file(f.path(), dir.parent_path() / sub / f.path().filename(),
                    fs::copy_options::overwrite_existing);
    }
  }
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

std::string error_of(const std::string& path) {
  try {
    load_system_config(path);
  } catch (const dype::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kHeader = "system: {name: t}\ntopology: {sockets: 2}\n";

TEST(SystemConfig, PaperTestbedLoads) {
  const auto cfg = load_system_config(configs() + "/systems/paper-testbed-pcie4.yaml");
  EXPECT_EQ(cfg.name, "paper-testbed-pcie4");
  EXPECT_EQ(cfg.sockets, 2);
  EXPECT_DOUBLE_EQ(cfg.inter_socket_bytes_per_s, 128e9);
  ASSERT_EQ(cfg.devices.size(), 6u);
  int gpus = 0, fpgas = 0;
  for (const auto& d : cfg.devices) {
    if (d.kind == DeviceKind::gpu) {
      ++gpus;
      EXPECT_EQ(d.socket, 0);
      EXPECT_EQ(d.link.lanes, 16);
      EXPECT_DOUBLE_EQ(d.power.idle_w, 45.0);
      EXPECT_DOUBLE_EQ(d.power.execute_w, 345.0);
      EXPECT_EQ(d.profile->memory_bytes, 64ull << 30);
    }
    if (d.kind == DeviceKind::fpga) {
      ++fpgas;
      EXPECT_EQ(d.socket, 1);
      EXPECT_EQ(d.link.lanes, 8);
      EXPECT_DOUBLE_EQ(d.power.idle_w, 19.5);
      ASSERT_TRUE(d.bitstream);
      EXPECT_DOUBLE_EQ(d.bitstream->find(dype::kernels::OpKind::spmm)->dynamic_w, 55.0);
      EXPECT_DOUBLE_EQ(d.bitstream->find(dype::kernels::OpKind::window_attention)->dynamic_w, 50.2);
    }
  }
  EXPECT_EQ(gpus, 2);
  EXPECT_EQ(fpgas, 3);
  EXPECT_FALSE(cfg.find("cpu0")->schedulable);
  // PCIe 4.0 x16 is the paper's 31.52 GB/s.
  EXPECT_NEAR(cfg.find("gpu0")->link.bandwidth_bytes_per_s(), 31.5e9, 0.05e9);
  EXPECT_NEAR(cfg.find("fpga0")->link.bandwidth_bytes_per_s(), 15.75e9, 0.05e9);
}

TEST(SystemConfig, EveryShippedSystemBuilds) {
  for (const char* f : {"paper-testbed-pcie4", "paper-testbed-pcie5", "paper-testbed-cxl3", "local"}) {
    SCOPED_TRACE(f);
    auto sys = dype::hw::System::from_config(load_system_config(configs() + "/systems/" + f + ".yaml"));
    EXPECT_GE(sys.devices().size(), 1u);
    EXPECT_EQ(sys.devices_of(DeviceKind::cpu).size(), 1u);
  }
  const auto p5 = load_system_config(configs() + "/systems/paper-testbed-pcie5.yaml");
  const auto cxl = load_system_config(configs() + "/systems/paper-testbed-cxl3.yaml");
  EXPECT_NEAR(p5.find("gpu0")->link.bandwidth_bytes_per_s(), 63.0e9, 0.1e9);
  EXPECT_GT(cxl.find("gpu0")->link.bandwidth_bytes_per_s(), p5.find("gpu0")->link.bandwidth_bytes_per_s());
}

TEST(SystemConfig, BadLanesNamesKeyPath) {
  const auto p = write_system("lanes.yaml", std::string(kHeader) + R"(devices:
  - {name: cpu0, backend: cpu}
  - {name: g0, backend: emu, model: devices/amd-mi210.yaml}
  - {name: g1, backend: emu, model: devices/amd-mi210.yaml, link: {type: pcie, generation: 4, lanes: 12}}
)");
  EXPECT_NE(error_of(p).find("lanes.yaml: devices[2].link.lanes: must be one of 1,2,4,8,16, got 12"),
            std::string::npos)
      << error_of(p);
}

// `transfers:` picks the paper's serial timing (its testbed files say so) or copies beside the
// kernels; anything else is named.
TEST(SystemConfig, TransfersSerialOrOverlap) {
  EXPECT_FALSE(load_system_config(configs() + "/systems/paper-testbed-pcie4.yaml").overlap_transfers);
  const std::string devices = "devices:\n  - {name: g, backend: emu, model: devices/amd-mi210.yaml}\n";
  // Unstated: overlap on emulated devices (they copy on their own engines), serial as soon as a
  // real accelerator backend is there (it still copies on the compute stream).
  EXPECT_TRUE(load_system_config(write_system("default.yaml", std::string(kHeader) + devices)).overlap_transfers);
  const auto real = write_system("real.yaml", std::string(kHeader) + devices +
                                                  "  - {name: c, backend: cuda, model: devices/amd-mi210.yaml}\n");
  EXPECT_FALSE(load_system_config(real).overlap_transfers);
  const auto se = write_system("serial.yaml", std::string(kHeader) + "transfers: serial\n" + devices);
  EXPECT_FALSE(load_system_config(se).overlap_transfers);
  const auto ov = write_system("overlap.yaml", std::string(kHeader) + "transfers: overlap\n" + devices);
  EXPECT_TRUE(load_system_config(ov).overlap_transfers);
  const auto bad = write_system("bad.yaml", std::string(kHeader) + "transfers: async\n" + devices);
  EXPECT_NE(error_of(bad).find("bad.yaml: transfers: must be serial or overlap, got 'async'"), std::string::npos)
      << error_of(bad);
}

TEST(SystemConfig, UnknownBackend) {
  const auto p = write_system("backend.yaml", std::string(kHeader) + "devices:\n  - {name: x, backend: opencl}\n");
  EXPECT_NE(error_of(p).find("devices[0].backend: must be one of cpu, emu, cuda, hip, xrt, got 'opencl'"),
            std::string::npos)
      << error_of(p);
}

TEST(SystemConfig, SocketOutOfRange) {
  const auto p = write_system("socket.yaml", std::string(kHeader) +
                                                 "devices:\n  - {name: g, backend: emu, model: devices/amd-mi210.yaml, socket: 2}\n");
  EXPECT_NE(error_of(p).find("devices[0].socket: must be in [0, 2), got 2"), std::string::npos) << error_of(p);
}

TEST(SystemConfig, UnknownKeyIsRejected) {
  const auto p = write_system("typo.yaml", std::string(kHeader) +
                                               "devices:\n  - {name: g, backend: emu, model: devices/amd-mi210.yaml, lane: 8}\n");
  EXPECT_NE(error_of(p).find("devices[0].lane: unknown key"), std::string::npos) << error_of(p);
}

TEST(SystemConfig, MissingModelFileAndMissingKey) {
  const auto a = write_system("nofile.yaml", std::string(kHeader) +
                                                 "devices:\n  - {name: g, backend: emu, model: devices/nope.yaml}\n");
  EXPECT_NE(error_of(a).find("devices[0].model: file not found"), std::string::npos) << error_of(a);
  const auto b = write_system("nomodel.yaml", std::string(kHeader) + "devices:\n  - {name: g, backend: emu}\n");
  EXPECT_NE(error_of(b).find("devices[0].model: required key missing"), std::string::npos) << error_of(b);
}

TEST(SystemConfig, DuplicateNamesAndBitstreamOnGpu) {
  const auto a = write_system("dup.yaml", std::string(kHeader) +
                                              "devices:\n  - {name: c, backend: cpu}\n  - {name: c, backend: cpu}\n");
  EXPECT_NE(error_of(a).find("devices[1].name: duplicate device name 'c'"), std::string::npos) << error_of(a);
  const auto b = write_system("bitgpu.yaml", std::string(kHeader) +
                                                 "devices:\n  - {name: g, backend: emu, model: devices/amd-mi210.yaml, "
                                                 "bitstream: bitstreams/u280-sextans-swat.yaml}\n");
  EXPECT_NE(error_of(b).find("devices[0].bitstream: only FPGAs take a bitstream"), std::string::npos) << error_of(b);
}

TEST(SystemConfig, PowerOverridesAndBadNumbers) {
  const auto ok = write_system("power.yaml", std::string(kHeader) + R"(power:
  gpu: {idle_w: 50}
devices:
  - {name: g, backend: emu, model: devices/amd-mi210.yaml, power: {transfer_w: 80}}
)");
  const auto cfg = load_system_config(ok);
  EXPECT_DOUBLE_EQ(cfg.devices[0].power.idle_w, 50.0);
  EXPECT_DOUBLE_EQ(cfg.devices[0].power.execute_w, 345.0);
  EXPECT_DOUBLE_EQ(cfg.devices[0].power.transfer_w, 80.0);
  const auto bad = write_system("inter.yaml", "system: {name: t}\ntopology: {sockets: 2, inter_socket_gbps: -3}\n"
                                              "devices:\n  - {name: c, backend: cpu}\n");
  EXPECT_NE(error_of(bad).find("topology.inter_socket_gbps: must be > 0, got -3"), std::string::npos) << error_of(bad);
  const auto syntax = write_system("syntax.yaml", "system: {name: t\n");
  EXPECT_NE(error_of(syntax).find("YAML syntax"), std::string::npos) << error_of(syntax);
}

TEST(SystemConfig, DetectionFindsTheCpu) {
  const auto cfg = dype::hw::detect_system_config();
  ASSERT_FALSE(cfg.devices.empty());
  EXPECT_EQ(cfg.devices[0].backend, "cpu");
  auto sys = dype::hw::System::from_config(cfg);
  EXPECT_EQ(sys.device("cpu0").kind(), DeviceKind::cpu);
  EXPECT_GT(sys.device("cpu0").info().memory_bytes, 0u);
}

}  // namespace
