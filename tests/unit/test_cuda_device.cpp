// The cuda backend on real hardware, what is cuda's own: staging chunks, SpMM plan reuse, peer
// copies, layer_norm not ported. GEMM and window attention against the CPU kernels, copies and
// bounds run for every backend in test_device_conformance.cpp.
// Without a driver or GPU, detection must come back empty with a reason, and the hardware tests
// skip with GTEST_SKIP() saying why.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hw/registry.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/spmm.h"
#include "kernels/cpu/window_attention.h"

#if DYPE_HAVE_CUDA
#include "hw/cuda/cuda_backend.h"
#include "hw/cuda/cuda_device.h"
#endif

namespace hw = dype::hw;

#if !DYPE_HAVE_CUDA
TEST(CudaDevice, NotBuilt) { GTEST_SKIP() << "built without CUDA (DYPE_WITH_CUDA=OFF or no nvcc)"; }
#else

namespace {

struct Gpus {
  std::vector<hw::DeviceConfig> configs;
  std::string why;
};
const Gpus& gpus() {
  static const Gpus g = [] {
    Gpus r;
    r.configs = hw::detect_cuda_devices(&r.why);
    return r;
  }();
  return g;
}

std::unique_ptr<hw::Device> make_gpu(int i) {
  hw::SystemConfig sys;
  return hw::find_backend("cuda")->create(gpus().configs.at(static_cast<std::size_t>(i)), sys);
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

#define NEED_GPU()                                                   \
  do {                                                               \
    if (gpus().configs.empty()) {                                    \
      GTEST_SKIP() << "no CUDA device: " << gpus().why;              \
    }                                                                \
  } while (0)

}  // namespace

TEST(CudaDevice, DetectionIsEmptyWithReasonOrListsGpus) {
  if (gpus().configs.empty()) {
    EXPECT_FALSE(gpus().why.empty());
    std::printf("no CUDA device here: %s\n", gpus().why.c_str());
  } else {
    for (const auto& c : gpus().configs) {
      EXPECT_EQ(c.backend, "cuda");
      EXPECT_EQ(c.kind, hw::DeviceKind::gpu);
    }
  }
  // The registry lists the backend either way.
  ASSERT_NE(hw::find_backend("cuda"), nullptr);
}

TEST(CudaDevice, CopyRoundTripAcrossStagingChunks) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  // 20 MiB + a tail: three 8 MiB staging chunks, the last partial.
  const auto v = random_vec((20u << 20) / 4 + 17, 1);
  auto b = upload(*gpu, v);
  EXPECT_EQ(download(*gpu, *b), v);
}

TEST(CudaDevice, SpmmMatchesCpuAndReusesPlanWhileGraphUnchanged) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  auto* cuda = dynamic_cast<hw::CudaDevice*>(gpu.get());
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
  EXPECT_EQ(cuda->spmm_plans_built(), 1);  // features changed, the graph did not
  gpu->copy_from_host(*bv, bytes(values));  // rewriting the graph invalidates the plan
  auto bx = upload(*gpu, random_vec(cols * feat, 99));
  gpu->launch(hw::KernelLaunch::spmm(*bp, *bi, *bv, *bx, *by, rows, cols, feat, nnz));
  EXPECT_EQ(cuda->spmm_plans_built(), 2);
}

TEST(CudaDevice, PeerCopyBetweenTwoGpus) {
  if (gpus().configs.size() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, found " << gpus().configs.size();
  }
  auto a = make_gpu(0), b = make_gpu(1);
  const auto v = random_vec(1 << 20, 30);
  auto src = upload(*a, v);
  auto dst = b->allocate(v.size() * 4);
  a->copy_to_peer(*src, *dst);  // P2P when cudaDeviceCanAccessPeer allows, else staged
  EXPECT_EQ(download(*b, *dst), v);
}

TEST(CudaDevice, LayerNormIsNotSupported) {
  NEED_GPU();
  auto gpu = make_gpu(0);
  EXPECT_FALSE(gpu->supports(dype::kernels::OpKind::layer_norm));
  EXPECT_TRUE(gpu->supports(dype::kernels::OpKind::spmm));
}

#endif
