// Pure planning of the CUDA backend (kernels/cuda/launch_plan.h): runs on every machine.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/launch_plan.h"
#include "common/error.h"

namespace kc = dype::kernels::cuda;

// Column-major GEMM as cuBLAS computes it (reference), to check the packed arguments reproduce the
// row-major product.
static void colmajor_sgemm(int rows, int cols, int inner, const float* a, int lda, const float* b,
                           int ldb, float* c, int ldc) {
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) {
      float s = 0;
      for (int p = 0; p < inner; ++p) s += a[i + p * lda] * b[p + j * ldb];
      c[i + j * ldc] = s;
    }
}

TEST(CudaLaunchPlan, RowMajorGemmThroughTransposeIdentity) {
  const int m = 3, k = 4, n = 5;
  std::vector<float> x(m * k), w(k * n), y(m * n), ref(m * n, 0.0f);
  for (int i = 0; i < m * k; ++i) x[i] = 0.5f * i - 1.0f;
  for (int i = 0; i < k * n; ++i) w[i] = 0.25f * (i % 7) - 0.3f;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) ref[i * n + j] += x[i * k + p] * w[p * n + j];
  const auto g = kc::row_major_gemm_args(m, k, n);
  EXPECT_EQ(g.rows, n);
  EXPECT_EQ(g.cols, m);
  EXPECT_EQ(g.inner, k);
  colmajor_sgemm(g.rows, g.cols, g.inner, w.data(), g.lda, x.data(), g.ldb, y.data(), g.ldc);
  for (int i = 0; i < m * n; ++i) EXPECT_NEAR(y[i], ref[i], 1e-5f) << i;
}

TEST(CudaLaunchPlan, GemmRejectsSizesBeyondInt) {
  EXPECT_THROW(kc::row_major_gemm_args(1LL << 31, 4, 4), dype::InputError);
  EXPECT_THROW(kc::row_major_gemm_args(4, -1, 4), dype::InputError);
  const auto g = kc::row_major_gemm_args(0, 0, 0);
  EXPECT_EQ(g.lda, 1);  // cuBLAS rejects leading dimension 0
  EXPECT_EQ(g.ldb, 1);
}

TEST(CudaLaunchPlan, WindowBandAndSharedMemory) {
  EXPECT_EQ(kc::window_band(100, 0), 1);
  EXPECT_EQ(kc::window_band(100, 8), 9);   // |i - j| <= 4
  EXPECT_EQ(kc::window_band(100, 9), 9);   // window / 2 rounds down, as on the CPU
  EXPECT_EQ(kc::window_band(5, 100), 5);   // clipped to seq_len
  const auto g = kc::window_attention_grid({1024, 12, 64, 256});
  EXPECT_EQ(g.grid_x, 1024u);
  EXPECT_EQ(g.grid_y, 12u);
  EXPECT_EQ(g.shared_bytes, (257 + 64 + 8) * sizeof(float));
  EXPECT_THROW(kc::window_attention_grid({1 << 20, 1, 64, 1 << 16}, 48 * 1024), dype::InputError);
  EXPECT_THROW(kc::window_attention_grid({16, 70000, 64, 4}), dype::InputError);
}

TEST(CudaLaunchPlan, EpilogueGridCoversOutputAndIsCapped) {
  const auto small = kc::epilogue_grid(3, 5);
  EXPECT_EQ(small.grid_x, 1u);
  const auto big = kc::epilogue_grid(1 << 20, 1024);
  EXPECT_EQ(big.grid_x, 65535u);  // grid-stride loop covers the rest
  const auto sm = kc::softmax_grid(7, 1000);
  EXPECT_EQ(sm.grid_x, 7u);
  EXPECT_EQ(sm.block, 256u);
  EXPECT_EQ(kc::softmax_grid(7, 10).block, 32u);
}

TEST(CudaLaunchPlan, ErrorMapping) {
  using C = kc::ErrorClass;
  EXPECT_EQ(kc::classify_cuda_error(35), C::no_device);   // insufficient driver
  EXPECT_EQ(kc::classify_cuda_error(100), C::no_device);  // no device
  EXPECT_EQ(kc::classify_cuda_error(34), C::no_device);   // stub libcuda
  EXPECT_EQ(kc::classify_cuda_error(2), C::out_of_memory);
  EXPECT_EQ(kc::classify_cuda_error(1), C::invalid_argument);
  EXPECT_EQ(kc::classify_cuda_error(209), C::unsupported);  // no sm_XX image
  EXPECT_EQ(kc::classify_cuda_error(700), C::fatal);        // illegal address
  EXPECT_EQ(kc::classify_cublas_status(3), C::out_of_memory);
  EXPECT_EQ(kc::classify_cublas_status(7), C::invalid_argument);
  EXPECT_EQ(kc::classify_cusparse_status(10), C::unsupported);
  EXPECT_EQ(kc::classify_cusparse_status(11), C::out_of_memory);
  EXPECT_EQ(kc::format_error("gpu0", "cudaMalloc", 2, "cudaErrorMemoryAllocation", "out of memory"),
            "gpu0: cudaMalloc failed: cudaErrorMemoryAllocation (2): out of memory");
}
