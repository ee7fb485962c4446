#pragma once
// The HIP backend's own kernels (kernels/hip/kernels.hip): the tiled FP32 GEMM with a fused
// bias/ReLU epilogue (rocBLAS is not packaged in Debian 12), row softmax, and sliding-window
// attention (banded SDDMM + softmax + SpMM fused per query row), and the NaN/Inf check of features
// in GPU memory. Each enqueues on `stream` and
// returns hipGetLastError() of the launch; geometry comes from kernels/hip/launch_plan.h.
// Built by hipcc; the host side includes only the runtime API header.
#include <cstddef>
#include <cstdint>

#include <hip/hip_runtime_api.h>

#include "kernels/hip/launch_plan.h"

namespace dype::kernels::hip {

// Row-major y[m x n] = x[m x k] w[k x n], then + bias[n] when bias is not null, then the
// activation, then + residual[m x n] when residual is not null (common/op.h's order). Sizes are
// checked by gemm_grid (throws InputError).
hipError_t gemm(const float* x, const float* w, const float* bias, const float* residual, float* y,
                std::int64_t m, std::int64_t k, std::int64_t n, Activation act, hipStream_t stream);

// In place over x[m x n], numerically stable (max subtracted).
hipError_t row_softmax(float* x, std::int64_t m, std::int64_t n, int warp_size, hipStream_t stream);

// y[m x n] = (x - mean) / sqrt(var + eps) * gamma + beta per row (kernels/cpu/norm.h's semantics).
hipError_t layer_norm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t m,
                      std::int64_t n, float eps, int warp_size, hipStream_t stream);

// q, k, v, out: [seq_len, heads * head_dim] row-major, head h in columns [h*head_dim, ...).
// Token i attends to j with |i - j| <= window / 2, scaled by 1/sqrt(head_dim) (same semantics as
// kernels/cpu/window_attention.h).
hipError_t window_attention(const float* q, const float* k, const float* v, float* out,
                            const WindowDims& dims, hipStream_t stream, std::size_t max_shared_bytes);

// Sets *flag (device memory) to nonzero when any of x[0..n) is NaN or Inf; leaves it otherwise. A
// request's features in a client's GPU memory are checked where they lie (hw/gpu/gpu_ipc_memory.h).
hipError_t flag_non_finite(const float* x, std::size_t n, unsigned int* flag, hipStream_t stream);

}  // namespace dype::kernels::hip
