// `dype-calibrate` on this machine: it measures the host's memory copy bandwidth and writes a
// calibrated CPU device model and a system file that loads as a system config carrying that
// measured bandwidth; accelerators it cannot find are reported as absent, not invented.
#include <gtest/gtest.h>

#include "../test_run_cli.h"

#include <cstdio>
#include <regex>
#include <string>

#include "../test_temp_dir.h"
#include "hw/system_file.h"

namespace {

const std::string kExe = std::string(DYPE_BINARY_DIR) + "/apps/dype-calibrate";

using Result = dype::test::CliResult;
Result run(const std::string& args) { return dype::test::run_cli(kExe, args); }

TEST(DypeCalibrateCli, MeasuresHostCopyBandwidthAndWritesALoadableSystem) {
  const auto dir = dype::test::process_temp_dir("dype_calibrate_cli");
  const Result r = run("--out " + dir.string() + " --max-mib 8 --reps 2 --power-window 0.2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("host memory copy (measured"), std::string::npos) << r.out;
  // Accelerators are either measured (links) or reported absent, never assumed.
  EXPECT_TRUE(r.out.find("accelerators: none detected") != std::string::npos || r.out.find(" h2d ") != std::string::npos)
      << r.out;
  const auto cfg = dype::hw::load_system_config((dir / "systems" / "calibrated.yaml").string());
  ASSERT_FALSE(cfg.devices.empty());
  const auto& cpu = cfg.devices.front();
  ASSERT_TRUE(cpu.profile.has_value());
  // Host copy traffic of a machine that runs tests: somewhere between 0.5 GB/s and 2 TB/s.
  EXPECT_GT(cpu.profile->memory_bandwidth_bytes_per_s, 0.5e9);
  EXPECT_LT(cpu.profile->memory_bandwidth_bytes_per_s, 2e12);
}

TEST(DypeCalibrateCli, BadArgumentsAreRefused) {
  for (const char* args : {"--max-mib 0", "--reps 0", "--base-model /nonexistent/cpu.yaml"}) {
    const Result r = run(args);
    EXPECT_NE(r.status, 0) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("wrote"), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace
