#pragma once
// Internal: per-ISA row kernels behind softmax_rows / layer_norm_rows (norm.cpp dispatches,
// norm_{scalar,avx2,avx512}.cpp implement them from norm_impl.h). Rows [r0, r1) of [rows x cols].
#include <cstdint>

namespace dype::kernels::cpu::detail {

void softmax_rows_scalar(float* x, std::int64_t r0, std::int64_t r1, std::int64_t cols);
void softmax_rows_avx2(float* x, std::int64_t r0, std::int64_t r1, std::int64_t cols);
void softmax_rows_avx512(float* x, std::int64_t r0, std::int64_t r1, std::int64_t cols);

void layer_norm_rows_scalar(const float* x, const float* gamma, const float* beta, float* y,
                            std::int64_t r0, std::int64_t r1, std::int64_t cols, float eps);
void layer_norm_rows_avx2(const float* x, const float* gamma, const float* beta, float* y,
                          std::int64_t r0, std::int64_t r1, std::int64_t cols, float eps);
void layer_norm_rows_avx512(const float* x, const float* gamma, const float* beta, float* y,
                            std::int64_t r0, std::int64_t r1, std::int64_t cols, float eps);

}  // namespace dype::kernels::cpu::detail
