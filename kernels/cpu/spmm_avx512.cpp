// AVX-512 SpMM row kernel (compiled with -mavx512f/bw/vl/dq; only called when the CPU has them).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/spmm_simd.h"

namespace dype::kernels::cpu::detail {
namespace {

struct Avx512 {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kWidth = 16;
  static constexpr int kMaxVecs = 8;  // 128 floats of accumulators, half the zmm file
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg bcast(float f) { return _mm512_set1_ps(f); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load_tail(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static void store_tail(float* p, Mask m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
  static Mask tail_mask(int k) { return static_cast<Mask>((1U << k) - 1U); }
};

}  // namespace

template <typename Index>
void spmm_rows_avx512(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                      std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1, float* y) {
  simd::spmm_rows<Avx512>(op, r0, r1, lo, hi, c0, c1, y);
}

template void spmm_rows_avx512<std::int32_t>(const SpmmOperands<std::int32_t>&,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);
template void spmm_rows_avx512<std::int64_t>(const SpmmOperands<std::int64_t>&,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);

}  // namespace dype::kernels::cpu::detail
