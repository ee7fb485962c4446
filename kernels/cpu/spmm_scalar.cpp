// Baseline SpMM row kernel: plain loops (the compiler may still use SSE2, the x86-64 baseline).
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/spmm_kernels.h"

namespace dype::kernels::cpu::detail {

template <typename Index>
void spmm_rows_scalar(const SpmmOperands<Index>& op, std::int64_t r0, std::int64_t r1,
                      std::int64_t lo, std::int64_t hi, std::int64_t c0, std::int64_t c1,
                      float* y) {
  const std::int64_t n = op.n;
  for (std::int64_t r = r0; r < r1; ++r) {
    float* out = y + (r - r0) * n;
    std::fill(out + c0, out + c1, 0.0f);
    const std::int64_t b = std::max<std::int64_t>(op.indptr[r], lo);
    const std::int64_t e = std::min<std::int64_t>(op.indptr[r + 1], hi);
    for (std::int64_t j = b; j < e; ++j) {
      const float a = op.values[j];
      const float* xr = op.x + static_cast<std::int64_t>(op.indices[j]) * n;
      for (std::int64_t c = c0; c < c1; ++c) out[c] += a * xr[c];
    }
  }
}

template void spmm_rows_scalar<std::int32_t>(const SpmmOperands<std::int32_t>&,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);
template void spmm_rows_scalar<std::int64_t>(const SpmmOperands<std::int64_t>&,
    std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, float*);

}  // namespace dype::kernels::cpu::detail
