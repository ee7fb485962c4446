#pragma once
// Internal to the SpMM implementation: the per-ISA row kernels spmm.cpp dispatches to. Each is
// compiled in its own translation unit (spmm_scalar.cpp, spmm_avx2.cpp, spmm_avx512.cpp) with only
// that ISA enabled, so the rest of the binary stays baseline x86-64.
#include <cstdint>

namespace dype::kernels::cpu::detail {

template <typename Index>
struct SpmmOperands {
  const Index* indptr = nullptr;
  const Index* indices = nullptr;
  const float* values = nullptr;
  const float* x = nullptr;  // [cols x n] row-major
  std::int64_t n = 0;        // feature length
};

// For every row r in [r0, r1): y[(r - r0) * n + c] = sum of values[j] * x[indices[j] * n + c] over
// the row's entries j clipped to the nnz window [lo, hi). Clipping lets one heavy row be shared by
// several tasks (each sums its own nnz window into a partial row). Overwrites the y rows.
template <typename Index>
using SpmmRowsFn = void (*)(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                            std::int64_t lo, std::int64_t hi, float* y);

template <typename Index>
void spmm_rows_scalar(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                      std::int64_t lo, std::int64_t hi, float* y);
template <typename Index>
void spmm_rows_avx2(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                    std::int64_t lo, std::int64_t hi, float* y);
template <typename Index>
void spmm_rows_avx512(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                      std::int64_t lo, std::int64_t hi, float* y);

}  // namespace dype::kernels::cpu::detail
