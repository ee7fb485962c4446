// The hip backend: detection, config integration and ROCm SMI loading on any machine; on real
// hardware, staging chunks, SpMM plan reuse, peer copies and mapped windows (GEMM with both
// epilogues and window attention against the CPU kernels run in test_device_conformance.cpp).
// Without a driver or GPU, detection comes back empty with a reason and the hardware tests skip
// with GTEST_SKIP() saying why.
#include <gtest/gtest.h>

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
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/window_attention.h"

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

template <typename T>
std::span<const std::byte> bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}
template <typename T>
hw::BufferPtr upload(hw::Device& d, const std::vector<T>& v) {
  auto b = d.allocate(v.size() * sizeof(T));
  d.copy_from_host(*b, bytes(v));
  return b;
}
std::vector<float> download(hw::Device& d, const hw::Buffer& b) {
  std::vector<float> v(b.size_bytes() / sizeof(float));
  d.copy_to_host(b, std::as_writable_bytes(std::span<float>(v)));
  return v;
}
std::vector<float> random_vec(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

#define NEED_GPU()                                      \
  do {                                                  \
    if (gpus().configs.empty()) {                       \
      GTEST_SKIP() << "no HIP device: " << gpus().why;  \
    }                                                   \
  } while (0)

}  // namespace

TEST(HipDevice, DetectionIsEmptyWithReasonOrListsGpus) {
  if (gpus().configs.empty()) {
    EXPECT_FALSE(gpus().why.empty());
    std::printf("no HIP device here: %s\n", gpus().why.c_str());
  } else {
    for (const auto& c : gpus().configs) {
      EXPECT_EQ(c.backend, "hip");
      EXPECT_EQ(c.kind, hw::DeviceKind::gpu);
    }
  }
  ASSERT_NE(hw::find_backend("hip"), nullptr);
  // detect_system_config (the `detect` path) goes through the registry and includes them.
  const auto detected = hw::detect_system_config();
  std::size_t hip = 0;
  for (const auto& d : detected.devices) hip += d.backend == "hip";
  EXPECT_EQ(hip, gpus().configs.size());
}

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

TEST(HipDevice, CopyRoundTripAcrossStagingChunks) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  // 20 MiB + a tail: three 8 MiB staging chunks, the last partial.
  const auto v = random_vec((20u << 20) / 4 + 17, 1);
  auto b = upload(*gpu, v);
  EXPECT_EQ(download(*gpu, *b), v);
}

TEST(HipDevice, SpmmMatchesCpuAndReusesPlanWhileGraphUnchanged) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  auto* hip = dynamic_cast<hw::HipDevice*>(gpu.get());
  const std::int32_t rows = 300, cols = 200, feat = 32;
  std::vector<std::int32_t> indptr{0}, indices;
  std::vector<float> values;
  std::mt19937 rng(5);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < 1 + r % 9; ++j) {
      indices.push_back(static_cast<std::int32_t>(rng() % cols));
      values.push_back(0.1f * (j + 1));
    }
    indptr.push_back(static_cast<std::int32_t>(indices.size()));
  }
  const std::int64_t nnz = static_cast<std::int64_t>(indices.size());
  auto bp = upload(*gpu, indptr), bi = upload(*gpu, indices), bv = upload(*gpu, values);
  auto by = gpu->allocate(rows * feat * 4);
  for (unsigned round = 0; round < 3; ++round) {
    const auto x = random_vec(cols * feat, 10 + round);
    auto bx = upload(*gpu, x);
    gpu->launch(hw::KernelLaunch::spmm(*bp, *bi, *bv, *bx, *by, rows, cols, feat, nnz));
    std::vector<float> ref(rows * feat, 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int p = indptr[r]; p < indptr[r + 1]; ++p)
        for (int f = 0; f < feat; ++f) ref[r * feat + f] += values[p] * x[indices[p] * feat + f];
    const auto y = download(*gpu, *by);
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4f) << i;
  }
  EXPECT_EQ(hip->spmm_plans_built(), 1);  // features changed, the graph did not
  gpu->copy_from_host(*bv, bytes(values));  // rewriting the graph invalidates the plan
  auto bx = upload(*gpu, random_vec(cols * feat, 99));
  gpu->launch(hw::KernelLaunch::spmm(*bp, *bi, *bv, *bx, *by, rows, cols, feat, nnz));
  EXPECT_EQ(hip->spmm_plans_built(), 2);
}

TEST(HipDevice, PeerCopyBetweenTwoGpus) {
  if (gpus().configs.size() < 2) {
    GTEST_SKIP() << "needs two HIP devices, found " << gpus().configs.size()
                 << (gpus().why.empty() ? "" : " (" + gpus().why + ")");
  }
  auto a = make_gpu(0), b = make_gpu(1);
  const auto v = random_vec(1 << 20, 30);
  auto src = upload(*a, v);
  auto dst = b->allocate(v.size() * 4);
  a->copy_to_peer(*src, *dst);  // P2P when hipDeviceCanAccessPeer allows, else staged
  EXPECT_EQ(download(*b, *dst), v);
}

TEST(HipDevice, MappedWindowCopiesRoundTrip) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  auto* hip = dynamic_cast<hw::HipDevice*>(gpu.get());
  // Page-aligned host memory stands in for an FPGA's mapped P2P window (same registration and
  // copy path; a real window needs an FPGA with a flags::p2p buffer).
  const std::size_t n = 1 << 18;
  const auto v = random_vec(n, 40);
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
