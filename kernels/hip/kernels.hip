// Own HIP kernels of the hip backend (see kernels.h). Built by hipcc for DYPE_HIP_ARCHS (gfx90a by
// default). Reductions are written for any wavefront size (64 on CDNA, 32 on RDNA).
#include <hip/hip_runtime.h>

#include <algorithm>
#include <cfloat>

#include "kernels/hip/gemm_tiling.h"
#include "kernels/hip/kernels.h"

namespace dype::kernels::hip {
namespace {

namespace t = gemm_tile;

__global__ void __launch_bounds__(t::kThreads)
    gemm_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                const float* __restrict__ residual, float* __restrict__ y, int m, int k, int n,
                Activation act) {
  __shared__ float xs[t::kTileM][t::kTileK + t::kPadA];
  __shared__ float ws[t::kTileK][t::kTileN];
  const int tid = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.x) * t::kTileM;
  const int col0 = static_cast<int>(blockIdx.y) * t::kTileN;
  float acc[t::kMicroM][t::kMicroN] = {};
  for (int k0 = 0; k0 < k; k0 += t::kTileK) {
    for (int l = 0; l < t::kLoadsA; ++l) {
      const t::RowCol p = t::a_tile_load(tid, l);
      const int r = row0 + p.row, c = k0 + p.col;
      xs[p.row][p.col] = (r < m && c < k) ? x[static_cast<std::int64_t>(r) * k + c] : 0.0f;
    }
    for (int l = 0; l < t::kLoadsB; ++l) {
      const t::RowCol p = t::b_tile_load(tid, l);
      const int r = k0 + p.row, c = col0 + p.col;
      ws[p.row][p.col] = (r < k && c < n) ? w[static_cast<std::int64_t>(r) * n + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < t::kTileK; ++kk) {
      float a[t::kMicroM], b[t::kMicroN];
#pragma unroll
      for (int i = 0; i < t::kMicroM; ++i) a[i] = xs[t::out_element(tid, i, 0).row][kk];
#pragma unroll
      for (int j = 0; j < t::kMicroN; ++j) b[j] = ws[kk][t::out_element(tid, 0, j).col];
#pragma unroll
      for (int i = 0; i < t::kMicroM; ++i)
#pragma unroll
        for (int j = 0; j < t::kMicroN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();  // the tiles are overwritten by the next step
  }
  // Fused epilogue: the accumulators are still in registers, so bias, activation and residual cost
  // no extra pass over y.
#pragma unroll
  for (int i = 0; i < t::kMicroM; ++i) {
#pragma unroll
    for (int j = 0; j < t::kMicroN; ++j) {
      const t::RowCol p = t::out_element(tid, i, j);
      const int r = row0 + p.row, c = col0 + p.col;
      if (r >= m || c >= n) continue;
      float v = acc[i][j];
      const std::int64_t at = static_cast<std::int64_t>(r) * n + c;
      if (bias) v += bias[c];
      if (act == Activation::relu) v = fmaxf(v, 0.0f);
      if (act == Activation::gelu) v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
      if (residual) v += residual[at];
      y[at] = v;
    }
  }
}

__device__ float wave_sum(float v) {
  for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_xor(v, o);
  return v;
}
__device__ float wave_max(float v) {
  for (int o = warpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor(v, o));
  return v;
}

// Workgroup-wide reduction through `scratch` (one float per wavefront); every thread gets the
// result.
template <bool IsMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % warpSize, wave = static_cast<int>(threadIdx.x) / warpSize;
  const int waves = (static_cast<int>(blockDim.x) + warpSize - 1) / warpSize;
  v = IsMax ? wave_max(v) : wave_sum(v);
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[wave] = v;
  __syncthreads();
  float r = IsMax ? -FLT_MAX : 0.0f;
  for (int i = 0; i < waves; ++i) r = IsMax ? fmaxf(r, scratch[i]) : r + scratch[i];
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
  sum = block_reduce<false>(sum, scratch + kReduceScratch);
  const float inv = 1.0f / sum;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) row[j] *= inv;
}

// One workgroup per row: mean, then the variance around it (two passes over the row, as the CPU
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
  const float var = block_reduce<false>(sq, scratch + kReduceScratch) / static_cast<float>(n);
  const float inv = rsqrtf(var + eps);
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = (row[j] - mean) * inv * gamma[j] + beta[j];
}

// One workgroup per (query row i = blockIdx.x, head h = blockIdx.y). LDS: q_i (head_dim), the
// reduction scratch and the band's scores. SDDMM: each wavefront takes keys of the band in turn,
// lanes split head_dim. Softmax over the band. SpMM: threads split head_dim and sum over the band.
__global__ void window_attention_kernel(const float* q, const float* k, const float* v, float* out,
                                        int seq_len, int heads, int head_dim, int half) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* scratch = qs + head_dim;
  float* scores = scratch + kReduceScratch;
  const int i = static_cast<int>(blockIdx.x), h = static_cast<int>(blockIdx.y);
  const std::int64_t ld = static_cast<std::int64_t>(heads) * head_dim;
  const std::int64_t col = static_cast<std::int64_t>(h) * head_dim;
  const int lo = max(0, i - half), hi = min(seq_len - 1, i + half), band = hi - lo + 1;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  for (int d = tid; d < head_dim; d += threads) qs[d] = q[i * ld + col + d];
  __syncthreads();
  const int lane = tid % warpSize, wave = tid / warpSize, waves = threads / warpSize;
  for (int j = wave; j < band; j += waves) {
    const float* kr = k + (lo + j) * ld + col;
    float s = 0.0f;
    for (int d = lane; d < head_dim; d += warpSize) s += qs[d] * kr[d];
    s = wave_sum(s);
    if (lane == 0) scores[j] = s * scale;
  }
  __syncthreads();
  float mx = -FLT_MAX;
  for (int j = tid; j < band; j += threads) mx = fmaxf(mx, scores[j]);
  mx = block_reduce<true>(mx, scratch);
  float sum = 0.0f;
  for (int j = tid; j < band; j += threads) {
    const float e = __expf(scores[j] - mx);
    scores[j] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, scratch);
  __syncthreads();  // every score written before the SpMM reads them
  const float inv = 1.0f / sum;
  for (int d = tid; d < head_dim; d += threads) {
    float acc = 0.0f;
    for (int j = 0; j < band; ++j) acc += scores[j] * v[(lo + j) * ld + col + d];
    out[i * ld + col + d] = acc * inv;
  }
}

}  // namespace

hipError_t gemm(const float* x, const float* w, const float* bias, const float* residual, float* y,
                std::int64_t m, std::int64_t k, std::int64_t n, Activation act, hipStream_t stream) {
  const Grid g = gemm_grid(m, k, n);
  if (m == 0 || n == 0) return hipSuccess;
  hipLaunchKernelGGL(gemm_kernel, dim3(g.grid_x, g.grid_y), dim3(g.block), 0, stream, x, w, bias,
                     residual, y, static_cast<int>(m), static_cast<int>(k), static_cast<int>(n), act);
  return hipGetLastError();
}

hipError_t row_softmax(float* x, std::int64_t m, std::int64_t n, int warp_size, hipStream_t stream) {
  if (m <= 0 || n <= 0) return hipSuccess;
  const Grid g = softmax_grid(m, n, warp_size);
  hipLaunchKernelGGL(row_softmax_kernel, dim3(g.grid_x), dim3(g.block), g.shared_bytes, stream, x, n);
  return hipGetLastError();
}

hipError_t layer_norm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t m,
                      std::int64_t n, float eps, int warp_size, hipStream_t stream) {
  if (m <= 0 || n <= 0) return hipSuccess;
  const Grid g = softmax_grid(m, n, warp_size);  // the same shape: one workgroup per row, two reductions
  hipLaunchKernelGGL(layer_norm_kernel, dim3(g.grid_x), dim3(g.block), g.shared_bytes, stream, x, gamma, beta, y, n,
                     eps);
  return hipGetLastError();
}

hipError_t window_attention(const float* q, const float* k, const float* v, float* out,
                            const WindowDims& d, hipStream_t stream, std::size_t max_shared_bytes) {
  const Grid g = window_attention_grid(d, max_shared_bytes);
  if (d.seq_len <= 0) return hipSuccess;
  hipLaunchKernelGGL(window_attention_kernel, dim3(g.grid_x, g.grid_y), dim3(g.block), g.shared_bytes,
                     stream, q, k, v, out, static_cast<int>(d.seq_len), static_cast<int>(d.heads),
                     static_cast<int>(d.head_dim), static_cast<int>(d.window / 2));
  return hipGetLastError();
}

namespace {
// Grid-stride over x; a workgroup in which any thread sees an exponent of all ones (NaN or Inf)
// sets the flag once.
__global__ void flag_non_finite_kernel(const float* x, std::size_t n, unsigned int* flag) {
  int any = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    any |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
  if (__syncthreads_or(any) && threadIdx.x == 0) atomicOr(flag, 1u);
}
}  // namespace

hipError_t flag_non_finite(const float* x, std::size_t n, unsigned int* flag, hipStream_t stream) {
  if (n == 0) return hipSuccess;
  constexpr unsigned int kBlock = 256;
  const std::size_t blocks = std::min<std::size_t>((n + kBlock - 1) / kBlock, 4096);
  hipLaunchKernelGGL(flag_non_finite_kernel, dim3(static_cast<unsigned int>(blocks)), dim3(kBlock), 0, stream, x, n,
                     flag);
  return hipGetLastError();
}

}  // namespace dype::kernels::hip
