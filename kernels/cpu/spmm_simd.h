#pragma once
// Internal to the SpMM implementation: the vectorised row kernel, written once over a small
// vector-traits type V and included by spmm_avx2.cpp and spmm_avx512.cpp, each with its own traits
// (in an anonymous namespace, so the two instantiations never collide).
//
// V provides: Reg, Mask, kWidth (floats per register), kMaxVecs (accumulator registers per row
// block), zero(), bcast(f), load(p), load_tail(p, m), fma(a, b, c), store(p, v),
// store_tail(p, m, v), tail_mask(k) (first k lanes).
//
// Per row, the output is produced kWidth * kMaxVecs columns at a time with all accumulators in
// registers across the row's nnz (Y is written once, never re-read); the last block of a row that
// is narrower uses as many registers as it needs and a masked last register, so any feature
// length (1, 17, 130, ...) runs vectorised.
#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/spmm_kernels.h"

namespace dype::kernels::cpu::detail::simd {

// Gathered rows are random accesses; prefetching the row kPrefetchDistance entries ahead hides
// part of the DRAM latency the hardware prefetcher cannot predict.
inline constexpr std::int64_t kPrefetchDistance = 8;

template <class V, int NV, bool kTail, typename Index>
inline void row_block(const SpmmOperands<Index>& op, std::int64_t b, std::int64_t e,
                      std::int64_t pf_end, std::int64_t c0, typename V::Mask tail, float* out) {
  using Reg = typename V::Reg;
  constexpr int W = V::kWidth;
  const std::int64_t n = op.n;
  const Index* idx = op.indices;
  const float* val = op.values;
  const float* x = op.x + c0;
  Reg acc[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) acc[v] = V::zero();
  for (std::int64_t j = b; j < e; ++j) {
    if (j + kPrefetchDistance < pf_end) {
      const char* p = reinterpret_cast<const char*>(
          x + static_cast<std::int64_t>(idx[j + kPrefetchDistance]) * n);
#pragma GCC unroll 16
      for (int line = 0; line < (NV * W * 4 + 63) / 64; ++line) {
        _mm_prefetch(p + line * 64, _MM_HINT_T0);
      }
    }
    const float* xr = x + static_cast<std::int64_t>(idx[j]) * n;
    const Reg a = V::bcast(val[j]);
#pragma GCC unroll 16
    for (int v = 0; v < NV - 1; ++v) acc[v] = V::fma(a, V::load(xr + v * W), acc[v]);
    if constexpr (kTail) {
      acc[NV - 1] = V::fma(a, V::load_tail(xr + (NV - 1) * W, tail), acc[NV - 1]);
    } else {
      acc[NV - 1] = V::fma(a, V::load(xr + (NV - 1) * W), acc[NV - 1]);
    }
  }
#pragma GCC unroll 16
  for (int v = 0; v < NV - 1; ++v) V::store(out + v * W, acc[v]);
  if constexpr (kTail) {
    V::store_tail(out + (NV - 1) * W, tail, acc[NV - 1]);
  } else {
    V::store(out + (NV - 1) * W, acc[NV - 1]);
  }
}

template <class V, bool kTail, typename Index>
inline void row_tail_block(int vecs, const SpmmOperands<Index>& op, std::int64_t b, std::int64_t e,
                           std::int64_t pf_end, std::int64_t c0, typename V::Mask tail,
                           float* out) {
  static_assert(V::kMaxVecs == 8);
  switch (vecs) {
    case 1: row_block<V, 1, kTail>(op, b, e, pf_end, c0, tail, out); break;
    case 2: row_block<V, 2, kTail>(op, b, e, pf_end, c0, tail, out); break;
    case 3: row_block<V, 3, kTail>(op, b, e, pf_end, c0, tail, out); break;
    case 4: row_block<V, 4, kTail>(op, b, e, pf_end, c0, tail, out); break;
    case 5: row_block<V, 5, kTail>(op, b, e, pf_end, c0, tail, out); break;
    case 6: row_block<V, 6, kTail>(op, b, e, pf_end, c0, tail, out); break;
    case 7: row_block<V, 7, kTail>(op, b, e, pf_end, c0, tail, out); break;
    default: row_block<V, 8, kTail>(op, b, e, pf_end, c0, tail, out); break;
  }
}

template <class V, typename Index>
void spmm_rows(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1, std::int64_t lo,
               std::int64_t hi, std::int64_t c0, std::int64_t c1, float* y) {
  constexpr std::int64_t W = V::kWidth;
  constexpr std::int64_t kBlock = W * V::kMaxVecs;
  const std::int64_t n = op.n;
  const std::int64_t width = c1 - c0;
  const std::int64_t full_blocks = width / kBlock;
  const std::int64_t rem = width % kBlock;
  const int rem_vecs = static_cast<int>((rem + W - 1) / W);
  const bool rem_masked = rem % W != 0;
  const typename V::Mask rem_mask = V::tail_mask(static_cast<int>(rem_masked ? rem % W : W));
  const typename V::Mask full_mask = V::tail_mask(static_cast<int>(W));
  const std::int64_t tail_c0 = c0 + full_blocks * kBlock;
  for (std::int64_t r = r0; r < r1; ++r) {
    float* out = y + (r - r0) * n;
    const std::int64_t b = std::max<std::int64_t>(op.indptr[r], lo);
    const std::int64_t e = std::min<std::int64_t>(op.indptr[r + 1], hi);
    for (std::int64_t blk = 0; blk < full_blocks; ++blk) {
      const std::int64_t cb = c0 + blk * kBlock;
      row_block<V, V::kMaxVecs, false>(op, b, e, hi, cb, full_mask, out + cb);
    }
    if (rem == 0) continue;
    if (rem_masked) {
      row_tail_block<V, true>(rem_vecs, op, b, e, hi, tail_c0, rem_mask, out + tail_c0);
    } else {
      row_tail_block<V, false>(rem_vecs, op, b, e, hi, tail_c0, rem_mask, out + tail_c0);
    }
  }
}

}  // namespace dype::kernels::cpu::detail::simd
