#pragma once
// Shared by the runtime tests (tests/unit/test_rt_*.cpp): emulated systems written on the fly.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "hw/system.h"
#include "hw/system_config.h"

namespace dype::rt::testing {

inline std::string configs_dir() { return std::string(DYPE_SOURCE_DIR) + "/configs"; }

// gpus emulated MI210s (socket 0) and fpgas emulated U280s with the SpMM+GEMM image (socket 1),
// all P2P-capable, plus an unschedulable host CPU. Results are computed (not timing-only) unless
// timing_only.
// `transfers`: the system option (serial | overlap), unstated when empty.
inline hw::System emu_system(int gpus, int fpgas, bool timing_only = false,
                             const std::string& fpga_bitstream = "u280-sextans-gemm.yaml",
                             const std::string& transfers = "") {
  const std::string dir = configs_dir();
  std::string y = "system: {name: rt-test}\ntopology: {sockets: 2, inter_socket_gbps: 128}\n";
  if (!transfers.empty()) y += "transfers: " + transfers + "\n";
  y += std::string("timing_only: ") + (timing_only ? "true" : "false") + "\ndevices:\n";
  y += "  - {name: cpu0, backend: cpu, model: " + dir + "/devices/generic-cpu.yaml, socket: 0, schedulable: false, threads: 0}\n";
  for (int i = 0; i < gpus; ++i)
    y += "  - {name: gpu" + std::to_string(i) + ", backend: emu, model: " + dir +
         "/devices/amd-mi210.yaml, socket: 0, p2p: true, link: {type: pcie, generation: 4, lanes: 16}}\n";
  for (int i = 0; i < fpgas; ++i)
    y += "  - {name: fpga" + std::to_string(i) + ", backend: emu, model: " + dir +
         "/devices/xilinx-u280.yaml, socket: 1, p2p: true, bitstream: " + dir + "/bitstreams/" + fpga_bitstream +
         ", link: {type: pcie, generation: 4, lanes: 8}}\n";
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dype-rt-test-" + std::to_string(::getpid()) + "-" + std::to_string(gpus) + "-" +
                             std::to_string(fpgas) + (timing_only ? "-t" : "") + transfers + ".yaml")).string();
  {
    std::ofstream f(path);
    f << y;
  }
  auto sys = hw::System::from_config(hw::load_system_config(path));
  std::filesystem::remove(path);
  return sys;
}

}  // namespace dype::rt::testing
