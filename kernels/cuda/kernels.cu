// Own CUDA kernels of the cuda backend (see kernels.h). Built for sm_80 and sm_90.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/kernels.h"

namespace dype::kernels::cuda {
namespace {

__global__ void bias_act_kernel(float* y, const float* bias, const float* residual, std::int64_t m,
                                std::int64_t n, Activation act) {
  const std::int64_t total = m * n;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float v = y[i];
    if (bias) v += bias[i % n];
    if (act == Activation::relu) v = fmaxf(v, 0.0f);
    if (act == Activation::gelu) v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    if (residual) v += residual[i];
    y[i] = v;
  }
}

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reduction through `scratch` (one float per warp); every thread gets the result.
template <bool IsMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = IsMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = IsMax ? -FLT_MAX : 0.0f;
  for (int w = 0; w < warps; ++w) r = IsMax ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

__global__ void row_softmax_kernel(float* x, std::int64_t n) {
  extern __shared__ float scratch[];
  float* row = x + static_cast<std::int64_t>(blockIdx.x) * n;
  float mx = -FLT_MAX;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, row[j]);
  mx = block_reduce<true>(mx, scratch);
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = __expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, scratch + 8);
  const float inv = 1.0f / sum;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) row[j] *= inv;
}

// One block per row: mean, then the variance around it (two passes over the row, as the CPU
// kernel, so the two agree to rounding), then (x - mean) / sqrt(var + eps) * gamma + beta.
__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                  std::int64_t n, float eps) {
  extern __shared__ float scratch[];
  const float* row = x + static_cast<std::int64_t>(blockIdx.x) * n;
  float* out = y + static_cast<std::int64_t>(blockIdx.x) * n;
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += row[j];
  const float mean = block_reduce<false>(sum, scratch) / static_cast<float>(n);
  float sq = 0.0f;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float d = row[j] - mean;
    sq += d * d;
  }
  const float var = block_reduce<false>(sq, scratch + 8) / static_cast<float>(n);
  const float inv = rsqrtf(var + eps);
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
}

// One block per (query row i = blockIdx.x, head h = blockIdx.y). Shared: q_i (head_dim), the
// band's scores, and reduction scratch. SDDMM: each warp takes keys of the band in turn, lanes
// split head_dim. Softmax over the band. SpMM: threads split head_dim and sum over the band.
__global__ void window_attention_kernel(const float* q, const float* k, const float* v, float* out,
                                        int seq_len, int heads, int head_dim, int half) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* scratch = qs + head_dim;  // 8 floats
  float* scores = scratch + 8;
  const int i = blockIdx.x, h = blockIdx.y;
  const std::int64_t ld = static_cast<std::int64_t>(heads) * head_dim;
  const std::int64_t col = static_cast<std::int64_t>(h) * head_dim;
  const int lo = max(0, i - half), hi = min(seq_len - 1, i + half), band = hi - lo + 1;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q[i * ld + col + d];
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int j = warp; j < band; j += warps) {
    const float* kr = k + (lo + j) * ld + col;
    float s = 0.0f;
    for (int d = lane; d < head_dim; d += 32) s += qs[d] * kr[d];
    s = warp_sum(s);
    if (lane == 0) scores[j] = s * scale;
  }
  __syncthreads();
  float mx = -FLT_MAX;
  for (int j = threadIdx.x; j < band; j += blockDim.x) mx = fmaxf(mx, scores[j]);
  mx = block_reduce<true>(mx, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < band; j += blockDim.x) {
    const float e = __expf(scores[j] - mx);
    scores[j] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, scratch);
  __syncthreads();  // every score written before the SpMM reads them
  const float inv = 1.0f / sum;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < band; ++j) acc += scores[j] * v[(lo + j) * ld + col + d];
    out[i * ld + col + d] = acc * inv;
  }
}

// Grid-stride over x; a thread that sees an exponent of all ones (NaN or Inf) sets the flag.
__global__ void flag_non_finite_kernel(const float* x, std::size_t n, unsigned int* flag) {
  unsigned int any = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    any |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
  if (__syncthreads_or(any) && threadIdx.x == 0) atomicOr(flag, 1u);
}

}  // namespace

cudaError_t flag_non_finite(const float* x, std::size_t n, unsigned int* flag,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr unsigned int kBlock = 256;
  const std::size_t blocks = std::min<std::size_t>((n + kBlock - 1) / kBlock, 4096);
  flag_non_finite_kernel<<<static_cast<unsigned int>(blocks), kBlock, 0, stream>>>(x, n, flag);
  return cudaGetLastError();
}

cudaError_t bias_act(float* y, const float* bias, const float* residual, std::int64_t m,
                     std::int64_t n, Activation act, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || (!bias && !residual && act == Activation::none)) return cudaSuccess;
  const Grid g = epilogue_grid(m, n);
  bias_act_kernel<<<g.grid_x, g.block, 0, stream>>>(y, bias, residual, m, n, act);
  return cudaGetLastError();
}

cudaError_t row_softmax(float* x, std::int64_t m, std::int64_t n, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const Grid g = softmax_grid(m, n);
  row_softmax_kernel<<<g.grid_x, g.block, g.shared_bytes, stream>>>(x, n);
  return cudaGetLastError();
}

cudaError_t layer_norm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t m,
                       std::int64_t n, float eps, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const Grid g = softmax_grid(m, n);  // the same shape: one block per row, two reductions
  layer_norm_kernel<<<g.grid_x, g.block, g.shared_bytes, stream>>>(x, gamma, beta, y, n, eps);
  return cudaGetLastError();
}

cudaError_t window_attention(const float* q, const float* k, const float* v, float* out,
                             const WindowDims& d, cudaStream_t stream, std::size_t max_shared_bytes) {
  if (d.seq_len <= 0) return cudaSuccess;
  const Grid g = window_attention_grid(d, max_shared_bytes);
  window_attention_kernel<<<dim3(g.grid_x, g.grid_y), g.block, g.shared_bytes, stream>>>(
      q, k, v, out, static_cast<int>(d.seq_len), static_cast<int>(d.heads),
      static_cast<int>(d.head_dim), static_cast<int>(d.window / 2));
  return cudaGetLastError();
}

}  // namespace dype::kernels::cuda
