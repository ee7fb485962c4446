// What the one GPU backend (hw/gpu/GpuDevice<Api>) does the same way on CUDA and on HIP, run on
// each vendor's first detected GPU: detection comes back empty with a reason or lists GPUs,
// host copies go through the double-buffered staging chunks (in and out at once, one stream per
// direction), the SpMM plan is built once per graph and rebuilt when the graph is rewritten, and
// peer copies between two GPUs. Kernels against the CPU run for every backend in
// test_device_conformance.cpp; what only one vendor has (ROCm SMI, mapped windows) stays in
// test_hip_device.cpp. Memory handed over by the CUDA shared-memory extension is copied in place
// on its own GPU.
// Without the vendor's build, driver or GPU the cases skip and say why.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../test_device_data.h"
#include "common/error.h"
#include "hw/device_ipc_memory.h"
#include "hw/gpu/spmm_plan_cache.h"
#include "hw/pinned_host_memory.h"
#include "hw/registry.h"
#include "hw/system_config.h"
#include "runtime/host_buffer_pool.h"

#if DYPE_HAVE_CUDA
#include "hw/cuda/cuda_backend.h"
#endif
#if DYPE_HAVE_HIP
#include "hw/hip/hip_backend.h"
#endif

namespace {

namespace hw = dype::hw;
namespace rt = dype::rt;
using hw::testing::bytes;
using hw::testing::download;
using hw::testing::random_floats;
using hw::testing::upload;

struct Gpus {
  bool built = false;
  std::vector<hw::DeviceConfig> configs;
  std::string why;
};

const Gpus& gpus(const std::string& vendor) {
  static const Gpus cuda = [] {
    Gpus r;
#if DYPE_HAVE_CUDA
    r.built = true;
    r.configs = hw::detect_cuda_devices(&r.why);
#else
    r.why = "built without CUDA (DYPE_WITH_CUDA=OFF or no nvcc)";
#endif
    return r;
  }();
  static const Gpus hip = [] {
    Gpus r;
#if DYPE_HAVE_HIP
    r.built = true;
    r.configs = hw::detect_hip_devices(&r.why);
#else
    r.why = "built without HIP (DYPE_WITH_HIP=OFF or no hipcc/libamdhip64-dev/librocsparse-dev)";
#endif
    return r;
  }();
  return vendor == "cuda" ? cuda : hip;
}

// SpMM plans the device has built (GpuDevice<Api> counts them apart from its vendor).
int spmm_plans_built(hw::Device& d) {
  if (auto* c = dynamic_cast<hw::SpmmPlanCount*>(&d)) return c->spmm_plans_built();
  ADD_FAILURE() << d.name() << " is not a GPU backend device";
  return -1;
}

// GPU memory as the shared-memory extension hands it to a device: the daemon opens another
// process's allocation from its IPC handle; here a buffer of the test's own stands in (the
// device copies from an address either way). Host reads are not what is under test.
class HandedOverMemory final : public hw::DeviceIpcMemory {
 public:
  HandedOverMemory(std::string backend, int ordinal, const hw::Buffer& b, std::size_t bytes)
      : backend_(std::move(backend)), ordinal_(ordinal), ptr_(b.gpu_address()), bytes_(bytes) {}
  std::size_t size() const override { return bytes_; }
  int device_id() const override { return ordinal_; }
  std::string_view backend() const override { return backend_; }
  const void* device_ptr() const override { return ptr_; }
  bool all_finite_f32(std::size_t, std::size_t) const override {
    throw dype::Error("not under test");
  }
  void read(std::size_t, void*, std::size_t) const override { throw dype::Error("not under test"); }
  void write(std::size_t, const void*, std::size_t) const override {
    throw dype::Error("not under test");
  }

 private:
  std::string backend_;
  int ordinal_;
  const void* ptr_;
  std::size_t bytes_;
};

class GpuDevice : public ::testing::TestWithParam<std::string> {
 protected:
  const Gpus& found() const { return gpus(GetParam()); }
  // Skips unless `n` GPUs of this vendor are here.
  bool have(std::size_t n) const { return found().configs.size() >= n; }
  // As detection plans them: transfers settled from the GPUs' copy engines.
  hw::SystemConfig detected() const {
    hw::SystemConfig sys;
    sys.devices = found().configs;
    hw::settle_transfers(sys);
    return sys;
  }
  std::unique_ptr<hw::Device> make(std::size_t i) const {
    return hw::find_backend(GetParam())->create(found().configs.at(i), detected());
  }
  std::string why_none() const {
    return "no " + GetParam() + " device" + (found().why.empty() ? "" : ": " + found().why);
  }
};

TEST_P(GpuDevice, DetectionIsEmptyWithReasonOrListsGpus) {
  if (!found().built) GTEST_SKIP() << found().why;
  ASSERT_NE(hw::find_backend(GetParam()), nullptr);  // the registry lists a built backend either way
  if (found().configs.empty()) {
    EXPECT_FALSE(found().why.empty());
    std::printf("no %s device here: %s\n", GetParam().c_str(), found().why.c_str());
  }
  for (const auto& c : found().configs) {
    EXPECT_EQ(c.backend, GetParam());
    EXPECT_EQ(c.kind, hw::DeviceKind::gpu);
    // Every detected GPU is plannable with no file written: a profile from its attributes.
    ASSERT_TRUE(c.profile.has_value()) << c.name << ": " << c.no_profile_why;
    std::printf("%s: profile %s (%s)%s%s, %.0f GB/s, %.1f TFLOP/s FP32, %d copy engines\n", c.name.c_str(),
                c.profile->id.c_str(), std::string(hw::to_string(c.profile->source)).c_str(),
                c.profile->estimated.empty() ? "" : "; estimated: ", c.profile->estimated.c_str(),
                c.profile->memory_bandwidth_bytes_per_s / 1e9, c.profile->peak_fp32_flops / 1e12, c.copy_engines);
  }
}

TEST_P(GpuDevice, CopyRoundTripAcrossStagingChunks) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);
  // 20 MiB + a tail: three 8 MiB staging chunks, the last partial.
  const auto v = random_floats((20u << 20) / 4 + 17, 1);
  auto b = upload(*gpu, v);
  EXPECT_EQ(download(*gpu, *b), v);
}

// A pinned host range (a registered shared-memory region) is copied in one DMA each way, with the
// same bytes as the staged path; the device's backend is what pinned it.
TEST_P(GpuDevice, CopiesPinnedHostMemoryWithoutStaging) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);  // adds the backend's pinner
  auto v = random_floats((20u << 20) / 4 + 17, 3);
  std::string why;
  auto pin = hw::pin_host_memory(v.data(), v.size() * sizeof(float), &why);
  ASSERT_NE(pin, nullptr) << why;
  EXPECT_NE(pin->backends().find(GetParam()), std::string::npos) << pin->backends();
  ASSERT_TRUE(hw::host_memory_pinned(v.data(), v.size() * sizeof(float)));
  auto b = upload(*gpu, v);
  std::vector<float> back(v.size(), 0.0f);
  auto pin_back = hw::pin_host_memory(back.data(), back.size() * sizeof(float), &why);
  ASSERT_NE(pin_back, nullptr) << why;
  gpu->copy_to_host(*b, std::as_writable_bytes(std::span<float>(back)));
  EXPECT_EQ(back, v);
  pin.reset();
  pin_back.reset();
  EXPECT_FALSE(hw::host_memory_pinned(v.data(), 4));
  EXPECT_EQ(download(*gpu, *b), v) << "the staged path after unpinning";
}

// A request's x received into the receive pool (a gRPC raw entry, an HTTP body) is pinned by the
// device's backend once, when the buffer is made, and kept so: the upload from it is one DMA, and
// the buffer serves the next request pinned. The time of each path is printed (measured).
TEST_P(GpuDevice, ReceivePoolBuffersArePinnedForOneDmaUploads) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);  // adds the backend's pinner
  rt::HostBufferPool pool;
  const std::size_t n = 68471u * 128u * 4u;  // the main job's x: 35 MB
  auto held = pool.acquire(n);
  ASSERT_TRUE(hw::host_memory_pinned(held.get(), n)) << pool.stats().last_pin_error;
  const auto v = random_floats(n / 4, 21);
  std::memcpy(held.get(), v.data(), n);
  auto b = gpu->allocate(n);
  const auto time_ms = [&](std::span<const std::byte> from) {
    const auto t0 = std::chrono::steady_clock::now();
    gpu->copy_from_host(*b, from);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  time_ms({held.get(), n});  // warm-up
  const double pinned_ms = time_ms({held.get(), n});
  EXPECT_EQ(download(*gpu, *b), v);
  const double staged_ms = time_ms(std::as_bytes(std::span<const float>(v)));
  std::printf("%s: 35 MB upload from a receive-pool buffer %.2f ms (one DMA), from pageable memory %.2f ms "
              "(staged) (measured)\n",
              gpu->name().c_str(), pinned_ms, staged_ms);
  std::byte* first = held.get();
  held.reset();
  auto again = pool.acquire(n);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(pool.stats().pinned, 1u) << "pinned once, reused pinned";
  EXPECT_TRUE(hw::host_memory_pinned(again.get(), n));
}

// Each direction has its own staging stream and pinned slots: copies in and out from two threads
// at once (as a pipeline's neighbouring stages do) each move their own data.
TEST_P(GpuDevice, CopiesBothWaysAtOnceKeepTheirData) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);
  const std::string why_not = "transfers: serial, because " + detected().transfers_why;
  std::printf("%s: copies beside kernels, one engine per direction: %s\n", gpu->name().c_str(),
              gpu->copies_overlap() ? "yes" : ("no (" + why_not + ")").c_str());
  // 20 MiB + a tail each: several staging chunks per copy, so the two directions interleave.
  const auto up = random_floats((20u << 20) / 4 + 5, 11), held = random_floats((20u << 20) / 4 + 9, 12);
  auto into = gpu->allocate(up.size() * 4);
  auto from = upload(*gpu, held);
  for (int round = 0; round < 3; ++round) {
    std::vector<float> down(held.size());
    std::exception_ptr in_error, out_error;  // a throw inside a thread would end the whole binary
    std::thread in([&] {
      try {
        gpu->copy_from_host(*into, bytes(up));
      } catch (...) {
        in_error = std::current_exception();
      }
    });
    std::thread out([&] {
      try {
        gpu->copy_to_host(*from, std::as_writable_bytes(std::span<float>(down)));
      } catch (...) {
        out_error = std::current_exception();
      }
    });
    in.join();
    out.join();
    ASSERT_NO_THROW(if (in_error) std::rethrow_exception(in_error)) << "copy in, round " << round;
    ASSERT_NO_THROW(if (out_error) std::rethrow_exception(out_error)) << "copy out, round " << round;
    ASSERT_EQ(down, held) << "round " << round;
    ASSERT_EQ(download(*gpu, *into), up) << "round " << round;
  }
}

TEST_P(GpuDevice, SpmmMatchesCpuAndReusesPlanWhileGraphUnchanged) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);
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
    const auto x = random_floats(cols * feat, 10 + round);
    auto bx = upload(*gpu, x);
    gpu->launch(hw::KernelLaunch::spmm(*bp, *bi, *bv, *bx, *by, rows, cols, feat, nnz));
    std::vector<float> ref(rows * feat, 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int p = indptr[r]; p < indptr[r + 1]; ++p)
        for (int f = 0; f < feat; ++f) ref[r * feat + f] += values[p] * x[indices[p] * feat + f];
    const auto y = download(*gpu, *by);
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4f) << i;
  }
  EXPECT_EQ(spmm_plans_built(*gpu), 1);  // features changed, the graph did not
  gpu->copy_from_host(*bv, bytes(values));  // rewriting the graph invalidates the plan
  auto bx = upload(*gpu, random_floats(cols * feat, 99));
  gpu->launch(hw::KernelLaunch::spmm(*bp, *bi, *bv, *bx, *by, rows, cols, feat, nnz));
  EXPECT_EQ(spmm_plans_built(*gpu), 2);
}

// Features a client left in this GPU's memory reach a stage's buffer by a device-local copy;
// memory of another device or vendor is declined (the engine then reads it through the host), and
// a copy past either end is an InputError.
TEST_P(GpuDevice, CopiesIpcMemoryOnItsOwnGpuInPlace) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);
  const int ordinal = found().configs.at(0).ordinal;
  const auto v = random_floats((12u << 20) / 4 + 5, 41);
  auto src = upload(*gpu, v);
  const HandedOverMemory mine(GetParam(), ordinal, *src, v.size() * 4);
  const std::size_t skip = 64;  // the tensor starts inside the region
  auto dst = gpu->allocate((v.size() - skip) * 4);
  ASSERT_TRUE(gpu->copy_from_ipc_memory(*dst, mine, skip * 4, (v.size() - skip) * 4).has_value());
  EXPECT_EQ(download(*gpu, *dst), std::vector<float>(v.begin() + skip, v.end()));
  const HandedOverMemory other_device(GetParam(), ordinal + 1, *src, v.size() * 4);
  EXPECT_FALSE(gpu->copy_from_ipc_memory(*dst, other_device, 0, 64).has_value());
  const HandedOverMemory other_vendor(GetParam() == "cuda" ? "hip" : "cuda", ordinal, *src,
                                      v.size() * 4);
  EXPECT_FALSE(gpu->copy_from_ipc_memory(*dst, other_vendor, 0, 64).has_value());
  EXPECT_THROW(gpu->copy_from_ipc_memory(*dst, mine, skip * 4 + 4, (v.size() - skip) * 4),
               dype::InputError);
}

// An answer for a client's GPU memory on this GPU (a CUDA output region) goes there by a
// device-local copy, at the output's offset, from a shard's rows; memory of another device or
// vendor is declined (the engine then writes it through the host), and a copy past either end is an
// InputError.
TEST_P(GpuDevice, CopiesIntoIpcMemoryOnItsOwnGpuInPlace) {
  if (!have(1)) GTEST_SKIP() << why_none();
  auto gpu = make(0);
  const int ordinal = found().configs.at(0).ordinal;
  const auto v = random_floats((12u << 20) / 4 + 5, 43);
  auto src = upload(*gpu, v);
  auto region = upload(*gpu, std::vector<float>(v.size() + 64, -1.0f));
  const HandedOverMemory theirs(GetParam(), ordinal, *region, (v.size() + 64) * 4);
  const std::size_t skip = 16, at = 32;  // rows from inside the shard, to inside the region
  const std::size_t bytes = (v.size() - skip) * 4;
  ASSERT_TRUE(gpu->copy_to_ipc_memory(*src, skip * 4, theirs, at * 4, bytes).has_value());
  const std::vector<float> got = download(*gpu, *region);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + at), std::vector<float>(at, -1.0f));
  EXPECT_EQ(std::vector<float>(got.begin() + at, got.begin() + at + (v.size() - skip)),
            std::vector<float>(v.begin() + skip, v.end()));
  const HandedOverMemory other_device(GetParam(), ordinal + 1, *region, (v.size() + 64) * 4);
  EXPECT_FALSE(gpu->copy_to_ipc_memory(*src, 0, other_device, 0, 64).has_value());
  EXPECT_THROW(gpu->copy_to_ipc_memory(*src, skip * 4 + 4, theirs, at * 4, bytes),
               dype::InputError);
  EXPECT_THROW(gpu->copy_to_ipc_memory(*src, 0, theirs, (v.size() + 64) * 4 - 60, 64),
               dype::InputError);
}

TEST_P(GpuDevice, PeerCopyBetweenTwoGpus) {
  if (!have(2)) {
    GTEST_SKIP() << "needs two " << GetParam() << " devices, found " << found().configs.size()
                 << (found().why.empty() ? "" : " (" + found().why + ")");
  }
  auto a = make(0), b = make(1);
  const auto v = random_floats(1 << 20, 30);
  auto src = upload(*a, v);
  auto dst = b->allocate(v.size() * 4);
  a->copy_to_peer(*src, *dst);  // P2P when the runtime says the pair can access each other, else staged
  EXPECT_EQ(download(*b, *dst), v);
}

INSTANTIATE_TEST_SUITE_P(Vendors, GpuDevice, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
