// What only the hip backend has: config integration and ROCm SMI loading on any machine; on real
// hardware, mapped-window copies and energy from ROCm SMI. Detection, staging chunks, SpMM plan
// reuse and peer copies, shared with CUDA, run in test_gpu_device.cpp; kernels against the CPU in
// test_device_conformance.cpp.
// Without a driver or GPU, detection comes back empty with a reason and the hardware tests skip
// with GTEST_SKIP() saying why.
#include <gtest/gtest.h>

#include "../test_device_data.h"
#include "../test_temp_dir.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hw/registry.h"
#include "hw/system.h"
#include "hw/system_config.h"

#if DYPE_HAVE_HIP
#include "hw/hip/hip_backend.h"
#include "hw/hip/hip_device.h"
#include "hw/hip/hip_smi.h"
#endif

namespace hw = dype::hw;

#if !DYPE_HAVE_HIP
TEST(HipDevice, NotBuilt) {
  EXPECT_EQ(hw::find_backend("hip"), nullptr);
  GTEST_SKIP() << "built without HIP (DYPE_WITH_HIP=OFF or no hipcc/libamdhip64-dev/librocsparse-dev)";
}
#else

namespace {

struct Gpus {
  std::vector<hw::DeviceConfig> configs;
  std::string why;
};
const Gpus& gpus() {
  static const Gpus g = [] {
    Gpus r;
    r.configs = hw::detect_hip_devices(&r.why);
    return r;
  }();
  return g;
}

std::unique_ptr<hw::Device> make_gpu(int i) {
  hw::SystemConfig sys;
  return hw::find_backend("hip")->create(gpus().configs.at(static_cast<std::size_t>(i)), sys);
}

using hw::testing::download;
using hw::testing::random_floats;
using hw::testing::upload;

#define NEED_GPU()                                      \
  do {                                                  \
    if (gpus().configs.empty()) {                       \
      GTEST_SKIP() << "no HIP device: " << gpus().why;  \
    }                                                   \
  } while (0)

}  // namespace

TEST(HipDevice, SystemConfigWithHipBackend) {
  namespace fs = std::filesystem;
  const fs::path root = dype::test::process_temp_dir("dype_test_hip_device");
  fs::create_directories(root / "systems");
  fs::create_directories(root / "devices");
  for (const auto& f : fs::directory_iterator(std::string(DYPE_SOURCE_DIR) + "/configs/devices")) {
    fs::copy_file(f.path(), root / "devices" / f.path().filename(), fs::copy_options::overwrite_existing);
  }
  const fs::path file = root / "systems" / "hip.yaml";
  std::ofstream(file) << "system: {name: hip-local}\ntopology: {sockets: 1}\ndevices:\n"
                         "  - {name: cpu0, backend: cpu}\n"
                         "  - {name: gpu0, backend: hip, model: devices/amd-mi210.yaml, ordinal: 0, p2p: true}\n";
  const auto cfg = hw::load_system_config(file.string());
  const auto* gpu = cfg.find("gpu0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->backend, "hip");
  EXPECT_EQ(gpu->kind, hw::DeviceKind::gpu);
  EXPECT_EQ(gpu->ordinal, 0);
  if (gpus().configs.empty()) {
    // Without a GPU, building the system names the entry's ordinal and says what HIP reported.
    try {
      hw::System::from_config(cfg);
      FAIL() << "expected an InputError";
    } catch (const dype::InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("devices[1].ordinal"), std::string::npos) << what;
      EXPECT_NE(what.find("no HIP device 0"), std::string::npos) << what;
    }
  } else {
    auto sys = hw::System::from_config(cfg);
    EXPECT_EQ(sys.device("gpu0").info().backend, "hip");
  }
}

TEST(HipDevice, RocmSmiLoadFailsWithReason) {
  std::string why;
  EXPECT_EQ(hw::RocmSmi::load(&why, "librocm_smi64_does_not_exist.so"), nullptr);
  EXPECT_NE(why.find("cannot load librocm_smi64_does_not_exist.so"), std::string::npos) << why;
  // The real library: either it monitors GPUs, or it says why not (no amdgpu driver here).
  why.clear();
  auto smi = hw::RocmSmi::load(&why);
  if (smi) {
    EXPECT_GT(smi->devices(), 0u);
  } else {
    EXPECT_FALSE(why.empty());
    std::printf("ROCm SMI unavailable: %s\n", why.c_str());
  }
}

TEST(HipDevice, MappedWindowCopiesRoundTrip) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  auto* hip = dynamic_cast<hw::HipDevice*>(gpu.get());
  // Page-aligned host memory stands in for an FPGA's mapped P2P window (same registration and
  // copy path; a real window needs an FPGA with a flags::p2p buffer).
  const std::size_t n = 1 << 18;
  const auto v = random_floats(n, 40);
  auto src = upload(*gpu, v);
  void* mem = std::aligned_alloc(4096, n * sizeof(float));
  ASSERT_NE(mem, nullptr);
  std::span<std::byte> window(static_cast<std::byte*>(mem), n * sizeof(float));
  hip->copy_to_mapped(*src, window);
  EXPECT_EQ(std::memcmp(mem, v.data(), window.size()), 0);
  auto back = gpu->allocate(window.size());
  hip->copy_from_mapped(*back, window);
  EXPECT_EQ(download(*gpu, *back), v);
  EXPECT_THROW(hip->copy_to_mapped(*src, window, 4), dype::InputError);  // overruns src
  gpu.reset();  // unregisters the window before it is freed
  std::free(mem);
}

TEST(HipDevice, EnergyFromRocmSmiWhenAvailable) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  std::string why;
  if (!hw::RocmSmi::load(&why)) GTEST_SKIP() << "ROCm SMI unavailable: " << why;
  const auto e = gpu->energy();
  if (!e) GTEST_SKIP() << "this GPU does not report rsmi_dev_energy_count_get";
  EXPECT_GE(e->execute_j, 0.0);
}

#endif
