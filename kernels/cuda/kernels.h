#pragma once
// The CUDA backend's own kernels (kernels/cuda/kernels.cu), for what cuBLAS and cuSPARSE lack:
// the GEMM epilogue (bias, ReLU/GELU, residual), row softmax, and sliding-window attention (banded SDDMM + softmax +
// SpMM fused per query row). Each enqueues on `stream` and returns cudaGetLastError() of the
// launch; geometry comes from kernels/cuda/launch_plan.h.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/launch_plan.h"

namespace dype::kernels::cuda {

// y[m x n] (+)= bias[n], then the activation, then (+)= residual[m x n] (the order of
// common/op.h's Epilogue). bias and residual may be null.
cudaError_t bias_act(float* y, const float* bias, const float* residual, std::int64_t m,
                     std::int64_t n, Activation act, cudaStream_t stream);

// In place over x[m x n], numerically stable (max subtracted).
cudaError_t row_softmax(float* x, std::int64_t m, std::int64_t n, cudaStream_t stream);

// y[m x n] = (x - mean) / sqrt(var + eps) * gamma + beta per row (kernels/cpu/norm.h's semantics).
cudaError_t layer_norm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t m,
                       std::int64_t n, float eps, cudaStream_t stream);

// q, k, v, out: [seq_len, heads * head_dim] row-major, head h in columns [h*head_dim, ...).
// Token i attends to j with |i - j| <= window / 2, scaled by 1/sqrt(head_dim) (same semantics as
// kernels/cpu/window_attention.h).
cudaError_t window_attention(const float* q, const float* k, const float* v, float* out,
                             const WindowDims& dims, cudaStream_t stream,
                             std::size_t max_shared_bytes);

// *flag |= 1 when any of x[0, n) is NaN or infinite (flag in device memory, cleared by the caller).
cudaError_t flag_non_finite(const float* x, std::size_t n, unsigned int* flag, cudaStream_t stream);

}  // namespace dype::kernels::cuda
