// AVX2 + FMA SpMM row kernel (compiled with -mavx2 -mfma; only called when the CPU has them).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/spmm_simd.h"

namespace dype::kernels::cpu::detail {
namespace {

struct Avx2 {
  using Reg = __m256;
  using Mask = __m256i;
  static constexpr int kWidth = 8;
  static constexpr int kMaxVecs = 8;  // 64 floats of accumulators, half the ymm file
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg bcast(float f) { return _mm256_set1_ps(f); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load_tail(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static void store_tail(float* p, Mask m, Reg v) { _mm256_maskstore_ps(p, m, v); }
  static Mask tail_mask(int k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

}  // namespace

template <typename Index>
void spmm_rows_avx2(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                    std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1, float* y) {
  simd::spmm_rows<Avx2>(op, r0, r1, lo, hi, c0, c1, y);
}

template void spmm_rows_avx2<std::int32_t>(const SpmmOperands<std::int32_t>&,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);
template void spmm_rows_avx2<std::int64_t>(const SpmmOperands<std::int64_t>&,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);

}  // namespace dype::kernels::cpu::detail
