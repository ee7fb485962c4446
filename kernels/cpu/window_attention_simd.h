#pragma once
// Internal: vector traits (scalar, AVX2, AVX-512) and a vectorised exp, shared by the window
// attention and norm kernels. Include ONLY from the per-ISA translation units (*_avx512.cpp,
// *_avx2.cpp, *_scalar.cpp), after defining DYPE_SIMD_ISA to 0 (scalar), 2 (AVX2) or 512.
//
// Everything here lives in an anonymous namespace on purpose: the same inline functions are
// compiled with different -m flags in different TUs, and with external linkage the linker could
// pick the AVX-512 copy for the scalar path (an ODR violation that crashes on older CPUs).
#include <cmath>
#include <cstdint>
#include <cstring>

#if !defined(DYPE_SIMD_ISA)
#error "define DYPE_SIMD_ISA (0, 2 or 512) before including window_attention_simd.h"
#endif
#if DYPE_SIMD_ISA != 0
#include <immintrin.h>
#endif
// GCC 12's AVX-512 intrinsics self-initialise a placeholder (`__m512 __Y = __Y;`) and then warn
// -Wmaybe-uninitialized wherever they are inlined (GCC bug 105593): a false positive that would
// fail -Werror builds. These TUs hold only kernel code, so silence it for them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dype::kernels::cpu {
namespace {

#if DYPE_SIMD_ISA == 512
struct Simd {
  using reg = __m512;
  static constexpr int kWidth = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  // Loads/stores the first n (< kWidth) lanes; the other lanes read as 0 and are not written.
  static reg load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
  static void store_n(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static float reduce_add(reg v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(reg v) { return _mm512_reduce_max_ps(v); }
  // exp(x) to ~2 ulp: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r, scalef for 2^n
  // (scalef handles underflow to denormals/0 for very negative x, which softmax produces).
  static reg exp(reg x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f)),
                      _mm512_set1_ps(-103.972084045410f));
    const reg n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    reg r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    reg p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
  }
};
#elif DYPE_SIMD_ISA == 2
struct Simd {
  using reg = __m256;
  static constexpr int kWidth = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static __m256i tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg load_n(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
  static void store_n(float* p, reg v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static float reduce_add(reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(reg v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Same polynomial as the AVX-512 variant; 2^n is built in the exponent bits, so x is clamped
  // at -87.3 (e^-87.3 ~ 1.2e-38, the smallest normal float): tinier results round up to that,
  // which is far below float resolution of any softmax sum.
  static reg exp(reg x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f)),
                      _mm256_set1_ps(-87.3365478515625f));
    const reg n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    reg r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    reg p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // n in [-126, 128] here; n = 128 only when x rounds to the upper clamp, split it in two
    // factors so the exponent field never overflows.
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const reg f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const reg f2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
  }
};
#else
struct Simd {
  using reg = float;
  static constexpr int kWidth = 1;
  static reg zero() { return 0.0f; }
  static reg set1(float x) { return x; }
  static reg load(const float* p) { return *p; }
  static void store(float* p, reg v) { *p = v; }
  static reg load_n(const float* p, int n) { return n > 0 ? *p : 0.0f; }
  static void store_n(float* p, reg v, int n) {
    if (n > 0) *p = v;
  }
  static reg fma(reg a, reg b, reg c) { return a * b + c; }
  static reg add(reg a, reg b) { return a + b; }
  static reg sub(reg a, reg b) { return a - b; }
  static reg mul(reg a, reg b) { return a * b; }
  static reg max(reg a, reg b) { return a > b ? a : b; }
  static float reduce_add(reg v) { return v; }
  static float reduce_max(reg v) { return v; }
  static reg exp(reg x) { return std::exp(x); }
};
#endif

// Reductions and maps over n contiguous floats with the traits above.
inline float simd_max(const float* x, std::int64_t n) {
  using S = Simd;
  std::int64_t i = 0;
  float m = -INFINITY;
  if (n >= S::kWidth) {
    typename S::reg acc = S::load(x);
    for (i = S::kWidth; i + S::kWidth <= n; i += S::kWidth) acc = S::max(acc, S::load(x + i));
    m = S::reduce_max(acc);
  }
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// x[i] = exp(scale * (x[i] - shift)) in place; returns the sum of the new values.
inline float simd_exp_sum(float* x, std::int64_t n, float scale, float shift) {
  using S = Simd;
  if constexpr (S::kWidth == 1) {
    // One lane has no partial sums to spread rounding over: accumulate in double instead.
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      x[i] = std::exp(scale * (x[i] - shift));
      sum += x[i];
    }
    return static_cast<float>(sum);
  }
  const typename S::reg vs = S::set1(scale);
  const typename S::reg vm = S::set1(shift);
  typename S::reg acc = S::zero();
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) {
    const typename S::reg e = S::exp(S::mul(S::sub(S::load(x + i), vm), vs));
    S::store(x + i, e);
    acc = S::add(acc, e);
  }
  float sum = S::reduce_add(acc);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    // Masked-off lanes load 0 and would contribute exp(-scale*shift): zero them via store_n and
    // re-load so only real lanes enter the sum.
    const typename S::reg e = S::exp(S::mul(S::sub(S::load_n(x + i, rest), vm), vs));
    S::store_n(x + i, e, rest);
    for (int t = 0; t < rest; ++t) sum += x[i + t];
  }
  return sum;
}

inline void simd_scale(float* x, std::int64_t n, float s) {
  using S = Simd;
  const typename S::reg vs = S::set1(s);
  std::int64_t i = 0;
  for (; i + S::kWidth <= n; i += S::kWidth) S::store(x + i, S::mul(S::load(x + i), vs));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    S::store_n(x + i, S::mul(S::load_n(x + i, rest), vs), rest);
  }
}

}  // namespace
}  // namespace dype::kernels::cpu
