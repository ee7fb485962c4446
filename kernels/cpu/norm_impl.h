#pragma once
// Internal: row softmax and layer norm over the vector traits of window_attention_simd.h, included
// by norm_{scalar,avx2,avx512}.cpp after DYPE_SIMD_ISA is defined.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/norm_internal.h"
#include "kernels/cpu/window_attention_simd.h"

namespace dype::kernels::cpu {
namespace {

struct NormKernels {
  using S = Simd;
  using reg = typename S::reg;
  static constexpr int W = S::kWidth;

  static void softmax(float* x, std::int64_t r0, std::int64_t r1, std::int64_t cols) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* row = x + r * cols;
      const float m = simd_max(row, cols);
      const float sum = simd_exp_sum(row, cols, 1.0f, m);
      simd_scale(row, cols, 1.0f / sum);
    }
  }

  static float sum(const float* x, std::int64_t n) {
    if constexpr (W == 1) {  // one lane: accumulate in double (see simd_exp_sum)
      double total = 0.0;
      for (std::int64_t i = 0; i < n; ++i) total += x[i];
      return static_cast<float>(total);
    }
    // Two accumulators hide the add latency; tails are masked loads (zeros do not change a sum).
    reg a0 = S::zero();
    reg a1 = S::zero();
    std::int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      a0 = S::add(a0, S::load(x + i));
      a1 = S::add(a1, S::load(x + i + W));
    }
    for (; i + W <= n; i += W) a0 = S::add(a0, S::load(x + i));
    if (i < n) a1 = S::add(a1, S::load_n(x + i, static_cast<int>(n - i)));
    return S::reduce_add(S::add(a0, a1));
  }

  // Sum of (x - mean)^2: two passes instead of E[x^2] - mean^2, which cancels badly when
  // |mean| >> std.
  static float sq_dev(const float* x, std::int64_t n, float mean) {
    if constexpr (W == 1) {
      double total = 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - mean;
        total += d * d;
      }
      return static_cast<float>(total);
    }
    const reg vm = S::set1(mean);
    reg a0 = S::zero();
    reg a1 = S::zero();
    std::int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const reg d0 = S::sub(S::load(x + i), vm);
      const reg d1 = S::sub(S::load(x + i + W), vm);
      a0 = S::fma(d0, d0, a0);
      a1 = S::fma(d1, d1, a1);
    }
    for (; i + W <= n; i += W) {
      const reg d0 = S::sub(S::load(x + i), vm);
      a0 = S::fma(d0, d0, a0);
    }
    float total = S::reduce_add(S::add(a0, a1));
    for (; i < n; ++i) total += (x[i] - mean) * (x[i] - mean);
    return total;
  }

  static void layer_norm(const float* x, const float* gamma, const float* beta, float* y,
                         std::int64_t r0, std::int64_t r1, std::int64_t cols, float eps) {
    const float inv_n = 1.0f / static_cast<float>(cols);
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      const float mean = sum(xr, cols) * inv_n;
      const float rstd = 1.0f / std::sqrt(sq_dev(xr, cols, mean) * inv_n + eps);
      const reg vm = S::set1(mean);
      const reg vr = S::set1(rstd);
      std::int64_t i = 0;
      for (; i + W <= cols; i += W) {
        const reg z = S::mul(S::sub(S::load(xr + i), vm), vr);
        S::store(yr + i, S::fma(z, S::load(gamma + i), S::load(beta + i)));
      }
      if (i < cols) {
        const int n = static_cast<int>(cols - i);
        const reg z = S::mul(S::sub(S::load_n(xr + i, n), vm), vr);
        S::store_n(yr + i, S::fma(z, S::load_n(gamma + i, n), S::load_n(beta + i, n)), n);
      }
    }
  }
};

}  // namespace
}  // namespace dype::kernels::cpu

// Defines the detail:: entry points for one ISA suffix.
#define DYPE_NORM_DEFINE(SUFFIX)                                                             \
  namespace dype::kernels::cpu::detail {                                                     \
  void softmax_rows_##SUFFIX(float* x, std::int64_t r0, std::int64_t r1, std::int64_t cols) { \
    NormKernels::softmax(x, r0, r1, cols);                                                   \
  }                                                                                          \
  void layer_norm_rows_##SUFFIX(const float* x, const float* gamma, const float* beta,       \
                                float* y, std::int64_t r0, std::int64_t r1,                  \
                                std::int64_t cols, float eps) {                              \
    NormKernels::layer_norm(x, gamma, beta, y, r0, r1, cols, eps);                           \
  }                                                                                          \
  }
