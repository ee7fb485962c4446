#pragma once
// Internal: the sliding-window attention block kernel, written once over the vector traits of
// window_attention_simd.h and instantiated by window_attention_{scalar,avx2,avx512}.cpp.
//
// For one head and a block of query rows:
//   1. pack K^T for the block's union key band (contiguous along keys, so key columns vectorise);
//   2. for each micro-tile of MR query rows, S = Q_tile K^T over the tile's union band, computed
//      as a register-blocked dense GEMM tile (MR rows x NVQ vectors of keys, loop over head_dim);
//   3. per row: max, exp(scale * (s - max)), sum over the row's own band |i - j| <= half only;
//      entries of the tile band outside the row's band are zeroed (the mask);
//   4. out_tile = P V_band as a register-blocked GEMM (RP rows x NVP vectors of head_dim, loop
//      over keys), scaled by 1/sum on the way out.
// Scratch is the packed band plus one S tile: O(window * head_dim) per thread, never seq_len^2.
#include <cstdint>

#include "kernels/cpu/window_attention_internal.h"
#include "kernels/cpu/window_attention_simd.h"

namespace dype::kernels::cpu {
namespace {

inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t imax(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

template <int MR, int NVQ, int RP, int NVP>
struct WindowAttentionKernel {
  static_assert(MR <= detail::kAttentionMaxTileRows && MR % RP == 0);
  using S = Simd;
  using reg = typename S::reg;
  static constexpr int W = S::kWidth;
  static_assert(detail::kAttentionColumnPad % W == 0);

  // kt[d * ldk + j] = K[kb0 + j][col0 + d]; columns [nk, ldk) are zero.
  static void pack_kt(const detail::AttentionBlock& b, std::int64_t kb0, std::int64_t nk,
                      std::int64_t ldk, float* kt) {
    const std::int64_t dim = b.head_dim;
    const float* src = b.k + kb0 * b.ld + b.col0;
    // 8 keys at a time: 8 source rows stay in L1 while we write 8 consecutive floats per d.
    std::int64_t j = 0;
    for (; j + 8 <= nk; j += 8) {
      const float* r = src + j * b.ld;
      for (std::int64_t d = 0; d < dim; ++d) {
        float* dst = kt + d * ldk + j;
        for (int t = 0; t < 8; ++t) dst[t] = r[t * b.ld + d];
      }
    }
    for (; j < nk; ++j) {
      const float* r = src + j * b.ld;
      for (std::int64_t d = 0; d < dim; ++d) kt[d * ldk + j] = r[d];
    }
    for (std::int64_t d = 0; d < dim; ++d) {
      for (std::int64_t c = nk; c < ldk; ++c) kt[d * ldk + c] = 0.0f;
    }
  }

  // s[r][0 .. NV*W) = sum_d q[r][d] * kt[d][0 .. NV*W) for R rows.
  template <int R, int NV>
  static void qk(const float* q, std::int64_t ldq, std::int64_t dim, const float* kt,
                 std::int64_t ldk, float* s, std::int64_t lds) {
    reg acc[R][NV];
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < NV; ++x) acc[r][x] = S::zero();
    for (std::int64_t d = 0; d < dim; ++d) {
      reg kv[NV];
      for (int x = 0; x < NV; ++x) kv[x] = S::load(kt + d * ldk + x * W);
      for (int r = 0; r < R; ++r) {
        const reg a = S::set1(q[r * ldq + d]);
        for (int x = 0; x < NV; ++x) acc[r][x] = S::fma(a, kv[x], acc[r][x]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int x = 0; x < NV; ++x) S::store(s + r * lds + x * W, acc[r][x]);
  }

  // out[r][0 .. NV*W) = inv[r] * sum_c p[r][c] * v[c][0 .. NV*W) for RG rows; the last vector
  // holds only `tail` valid lanes when TAIL.
  template <int RG, int NV, bool TAIL>
  static void pv(const float* p, std::int64_t lds, std::int64_t ncols, const float* v,
                 std::int64_t ldv, float* out, std::int64_t ldo, const float* inv, int tail) {
    reg acc[RG][NV];
    for (int r = 0; r < RG; ++r)
      for (int x = 0; x < NV; ++x) acc[r][x] = S::zero();
    for (std::int64_t c = 0; c < ncols; ++c) {
      const float* vr = v + c * ldv;
      reg vv[NV];
      for (int x = 0; x < NV; ++x) {
        vv[x] = (TAIL && x == NV - 1) ? S::load_n(vr + x * W, tail) : S::load(vr + x * W);
      }
      for (int r = 0; r < RG; ++r) {
        const reg a = S::set1(p[r * lds + c]);
        for (int x = 0; x < NV; ++x) acc[r][x] = S::fma(a, vv[x], acc[r][x]);
      }
    }
    for (int r = 0; r < RG; ++r) {
      const reg is = S::set1(inv[r]);
      for (int x = 0; x < NV; ++x) {
        if (TAIL && x == NV - 1) {
          S::store_n(out + r * ldo + x * W, S::mul(acc[r][x], is), tail);
        } else {
          S::store(out + r * ldo + x * W, S::mul(acc[r][x], is));
        }
      }
    }
  }

  // The last, partial chunk of head_dim: nv vectors (1..NVP), the last one `tail` lanes wide
  // (tail == 0: all full).
  template <int RG, int NV = NVP>
  static void pv_rest(int nv, int tail, const float* p, std::int64_t lds, std::int64_t ncols,
                      const float* v, std::int64_t ldv, float* out, std::int64_t ldo,
                      const float* inv) {
    if constexpr (NV >= 1) {
      if (nv == NV) {
        if (tail != 0) {
          pv<RG, NV, true>(p, lds, ncols, v, ldv, out, ldo, inv, tail);
        } else {
          pv<RG, NV, false>(p, lds, ncols, v, ldv, out, ldo, inv, 0);
        }
        return;
      }
      if constexpr (NV > 1) pv_rest<RG, NV - 1>(nv, tail, p, lds, ncols, v, ldv, out, ldo, inv);
    }
  }

  // R query rows starting at i0 (R == MR, or 1 for the rows left over at the block's end).
  template <int R>
  static void tile(const detail::AttentionBlock& b, std::int64_t i0, std::int64_t kb0,
                   const float* kt, std::int64_t ldk, float* s, float* inv) {
    const std::int64_t n = b.seq_len;
    const std::int64_t h = b.half;
    const std::int64_t dim = b.head_dim;
    // Union band of the tile, relative to kb0; [ca, cb) rounded out to whole vectors (the packed
    // band is zero-padded to ldk, a multiple of the pad, so cb <= ldk).
    const std::int64_t lo = imax(0, i0 - h) - kb0;
    const std::int64_t hi = imin(n, i0 + R + h) - kb0;
    const std::int64_t ca = lo / W * W;
    const std::int64_t cb = (hi + W - 1) / W * W;

    const float* qrow = b.q + i0 * b.ld + b.col0;
    std::int64_t col = ca;
    for (; col + NVQ * W <= cb; col += NVQ * W) {
      qk<R, NVQ>(qrow, b.ld, dim, kt + col, ldk, s + col, ldk);
    }
    for (; col < cb; col += W) qk<R, 1>(qrow, b.ld, dim, kt + col, ldk, s + col, ldk);

    for (int r = 0; r < R; ++r) {
      const std::int64_t i = i0 + r;
      const std::int64_t rlo = imax(0, i - h) - kb0;
      const std::int64_t rhi = imin(n, i + h + 1) - kb0;
      float* sr = s + r * ldk;
      const float m = simd_max(sr + rlo, rhi - rlo);
      const float sum = simd_exp_sum(sr + rlo, rhi - rlo, b.scale, m);
      inv[r] = 1.0f / sum;
      for (std::int64_t c = ca; c < rlo; ++c) sr[c] = 0.0f;
      for (std::int64_t c = rhi; c < hi; ++c) sr[c] = 0.0f;
    }

    // Only keys [ca, hi) exist in V (cb may run past the sequence's end).
    const float* vband = b.v + (kb0 + ca) * b.ld + b.col0;
    float* orow = b.out + i0 * b.ld + b.col0;
    constexpr int RG = R < RP ? R : RP;
    for (int r0 = 0; r0 < R; r0 += RG) {
      const float* p = s + r0 * ldk + ca;
      float* o = orow + r0 * b.ld;
      std::int64_t d0 = 0;
      for (; d0 + NVP * W <= dim; d0 += NVP * W) {
        pv<RG, NVP, false>(p, ldk, hi - ca, vband + d0, b.ld, o + d0, b.ld, inv + r0, 0);
      }
      if (d0 < dim) {
        const std::int64_t rest = dim - d0;
        const int nv = static_cast<int>((rest + W - 1) / W);
        const int tail = static_cast<int>(rest % W);
        pv_rest<RG>(nv, tail, p, ldk, hi - ca, vband + d0, b.ld, o + d0, b.ld, inv + r0);
      }
    }
  }

  static void run(const detail::AttentionBlock& b) {
    const std::int64_t kb0 = imax(0, b.row_begin - b.half);
    const std::int64_t kb1 = imin(b.seq_len, b.row_end + b.half);
    const std::int64_t nk = kb1 - kb0;
    const std::int64_t ldk = (nk + detail::kAttentionColumnPad - 1) /
                             detail::kAttentionColumnPad * detail::kAttentionColumnPad;
    float* kt = b.scratch;
    float* s = kt + b.head_dim * ldk;
    float* inv = s + detail::kAttentionMaxTileRows * ldk;
    pack_kt(b, kb0, nk, ldk, kt);
    std::int64_t i = b.row_begin;
    for (; i + MR <= b.row_end; i += MR) tile<MR>(b, i, kb0, kt, ldk, s, inv);
    for (; i < b.row_end; ++i) tile<1>(b, i, kb0, kt, ldk, s, inv);
  }
};

}  // namespace
}  // namespace dype::kernels::cpu
