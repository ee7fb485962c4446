// hw::Device's optional capabilities, asked through the interface alone (no backend casts): a
// device that lacks one answers with the default (no profile, no modelled time, not
// reconfigurable, no timing-only) and refuses the action naming itself; emulated devices answer
// from their profile and bitstream, and the runtime's callers see the same figures.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "hw/device_profile.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "common/op.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/planner.h"

namespace dype::hw {
namespace {

System testbed() {
  return System::from_config(load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml"));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceCapabilities, MeasuredDeviceAnswersWithTheDefaultsAndRefusesByName) {
  System sys = testbed();
  Device& cpu = sys.device("cpu0");
  EXPECT_EQ(cpu.info().time_source, TimeSource::measured);
  EXPECT_EQ(cpu.device_profile(), nullptr);
  EXPECT_FALSE(cpu.modelled_kernel_time_s(kernels::OpShape{.kind = kernels::OpKind::gemm, .m = 64, .k = 64, .n = 64}).has_value());
  EXPECT_FALSE(cpu.reconfigurable());
  EXPECT_EQ(cpu.bitstream(), nullptr);
  EXPECT_FALSE(cpu.can_run_timing_only());
  EXPECT_FALSE(cpu.timing_only());
  EXPECT_NO_THROW(cpu.set_timing_only(false));
  EXPECT_NE(error_of([&] { cpu.set_timing_only(true); }).find("cpu0: cannot run timing-only"), std::string::npos);
  EXPECT_FALSE(cpu.timing_only());
  const Bitstream bs = load_bitstream(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-gemm.yaml");
  EXPECT_NE(error_of([&] { cpu.load_bitstream(bs); }).find("cpu0: does not load bitstreams"), std::string::npos);
  EXPECT_NE(error_of([&] { cpu.unload_bitstream(); }).find("cpu0: does not unload bitstreams"), std::string::npos);
}

TEST(DeviceCapabilities, EmulatedDevicesAnswerFromProfileAndBitstream) {
  System sys = testbed();
  Device& gpu = sys.device("gpu0");
  Device& fpga = sys.device("fpga0");
  EXPECT_EQ(gpu.info().time_source, TimeSource::modelled);
  ASSERT_NE(gpu.device_profile(), nullptr);
  EXPECT_EQ(gpu.device_profile()->id, "amd-mi210");
  ASSERT_NE(fpga.device_profile(), nullptr);
  EXPECT_EQ(fpga.device_profile()->id, "xilinx-u280");
  EXPECT_EQ(rt::device_profile_id(sys, fpga), "xilinx-u280");

  // The modelled time the planner costs with is the device's own.
  const kernels::OpShape shape{.kind = kernels::OpKind::gemm, .m = 4096, .k = 128, .n = 128};
  const auto t = gpu.modelled_kernel_time_s(shape);
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(*t, 0.0);
  EXPECT_DOUBLE_EQ(rt::modelled_kernel_time_s(sys, gpu, shape), *t);

  EXPECT_FALSE(gpu.reconfigurable());
  EXPECT_TRUE(fpga.reconfigurable());
  ASSERT_NE(fpga.bitstream(), nullptr);
  const std::string before = fpga.bitstream()->name;
  const Bitstream gemm = load_bitstream(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-gemm.yaml");
  const Event ev = fpga.load_bitstream(gemm);
  EXPECT_EQ(ev.source, TimeSource::modelled);
  EXPECT_NEAR(ev.duration_s(), gemm.load_time_s, 1e-12);
  EXPECT_EQ(fpga.bitstream()->name, "u280-sextans-gemm");
  EXPECT_TRUE(fpga.supports(kernels::OpKind::gemm));
  fpga.unload_bitstream();
  EXPECT_EQ(fpga.bitstream(), nullptr);
  EXPECT_FALSE(fpga.supports(kernels::OpKind::spmm));
  EXPECT_NE(before, "");

  EXPECT_TRUE(gpu.can_run_timing_only());
  gpu.set_timing_only(true);
  EXPECT_TRUE(gpu.timing_only());
  gpu.set_timing_only(false);
  EXPECT_FALSE(gpu.timing_only());
}

}  // namespace
}  // namespace dype::hw
