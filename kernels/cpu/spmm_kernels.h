#pragma once
// Internal to the SpMM implementation: the per-ISA row kernels spmm.cpp dispatches to. Each is
// compiled in its own translation unit (spmm_scalar.cpp, spmm_avx2.cpp, spmm_avx512.cpp) with only
// that ISA enabled, so the rest of the binary stays baseline x86-64.
#include <cstdint>
#include <span>

#include "common/csr.h"

namespace dype::kernels::cpu::detail {

template <typename Index>
struct SpmmOperands {
  const Index* indptr = nullptr;
  const Index* indices = nullptr;
  const float* values = nullptr;
  const float* x = nullptr;  // [cols x n] row-major
  std::int64_t n = 0;        // feature length
};

// For every row r in [r0, r1) and column c in the panel [c0, c1):
// y[(r - r0) * n + c] = sum of values[j] * x[indices[j] * n + c] over the row's entries j clipped
// to the nnz window [lo, hi). Clipping lets one heavy row be shared by several tasks (each sums its
// own nnz window into a partial row). Overwrites those y entries and touches no others.
template <typename Index>
using SpmmRowsFn = void (*)(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                            std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1,
                            float* y);

template <typename Index>
void spmm_rows_scalar(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                      std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1,
                      float* y);
template <typename Index>
void spmm_rows_avx2(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                    std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1,
                    float* y);
template <typename Index>
void spmm_rows_avx512(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                      std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1,
                      float* y);

// Column panels: when X is larger than the cache, Y is computed panel by panel of columns, so the
// random gathers of one pass hit a cache-sized slice of X instead of missing to DRAM; each pass
// re-reads A (8 bytes per nnz against 4 * panel bytes gathered per nnz).
inline constexpr std::int64_t kPanelStep = 16;  // floats: one zmm, two ymm
inline constexpr std::int64_t kMinPanel = 32;   // floats: two whole cache lines per gathered row

// Panel width (floats) for X of cols x n floats: n when X fits in cache_bytes or no panel of at
// least kMinPanel columns does, else the widest multiple of kPanelStep that fits.
std::int64_t spmm_panel_width(std::int64_t cols, std::int64_t n, std::int64_t cache_bytes);
// Size of the last-level cache this process sees (sysconf), 8 MiB when unknown.
std::int64_t llc_bytes();
// The panel width spmm() uses: spmm_panel_width against most of llc_bytes().
std::int64_t spmm_default_panel(std::int64_t cols, std::int64_t n);

// spmm() with a given panel width (spmm() picks it with spmm_panel_width; tests force small ones).
template <typename Index>
void spmm_panels(const CsrView<Index>& a, std::span<const float> x, std::int64_t n,
                 std::span<float> y, std::int64_t panel);

}  // namespace dype::kernels::cpu::detail
