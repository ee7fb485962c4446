#pragma once
// Sparse x dense matrix product Y = A X with A in CSR (int32 or int64 indices), X and Y row-major
// FP32. Multi-threaded with oneTBB; work is split by nnz, not rows, so power-law graphs balance.
#include <cstdint>
#include <span>

#include "common/csr.h"

namespace dype::kernels::cpu {

// Y[a.rows x n] = A[a.rows x a.cols] * X[a.cols x n]. Y is overwritten. Throws InputError when the
// spans are too small for the shapes.
void spmm(const CsrView<std::int32_t>& a, std::span<const float> x, std::int64_t n,
          std::span<float> y);
void spmm(const CsrView<std::int64_t>& a, std::span<const float> x, std::int64_t n,
          std::span<float> y);

}  // namespace dype::kernels::cpu
