#pragma once
// Row-wise softmax and layer normalisation over row-major [rows x cols] FP32 matrices.
#include <cstdint>
#include <span>

namespace dype::kernels::cpu {

// In place, numerically stable (subtracts the row max).
void softmax_rows(std::span<float> x, std::int64_t rows, std::int64_t cols);

// y = (x - mean) / sqrt(var + eps) * gamma + beta, per row; gamma/beta have cols entries.
void layer_norm_rows(std::span<const float> x, std::span<const float> gamma,
                     std::span<const float> beta, std::span<float> y, std::int64_t rows,
                     std::int64_t cols, float eps = 1e-5f);

}  // namespace dype::kernels::cpu
