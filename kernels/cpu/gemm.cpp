#include "kernels/cpu/gemm.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/error.h"

// Engine: oneDNN's dnnl_sgemm (JIT AVX-512/AVX2 kernels chosen at run time by oneDNN itself) on
// sub-blocks of kSubRows rows, each followed at once by the epilogue (bias, ReLU/GELU, residual) while the block's
// output is still in cache, so Y is effectively written once. (oneDNN's matmul primitive with the
// epilogue fused as post-ops measured 0.83x of plain dnnl_sgemm on this project's AMD EPYC VM, 2
// threads, 100000 x 128 x 128; sgemm on sub-blocks plus the in-cache epilogue is on par with it.)
// Threading: Debian's libdnnl uses OpenMP (libgomp). Instead of letting OpenMP start its own team
// next to oneTBB's workers (two pools oversubscribing the cores, OpenMP threads spinning after each
// call), we cut M into row blocks, run the blocks as oneTBB tasks, and make oneDNN single-threaded
// on each worker. The thread count is therefore the oneTBB arena's: tbb::global_control /
// task_arena control GEMM exactly as they control SpMM.

namespace dype::kernels::cpu {
namespace {

// Rows per task: big enough that the per-call cost (weight packing of k x n floats in each sgemm)
// is small next to the block's rows x k x n multiply-adds, small enough to give each thread about
// kBlocksPerThread blocks to balance with.
constexpr std::int64_t kMinBlockRows = 256;
constexpr std::int64_t kMaxBlockRows = 16384;
constexpr std::int64_t kBlocksPerThread = 8;

// omp_set_num_threads() of the OpenMP runtime libdnnl is linked with. Looked up at run time
// because dype does not link OpenMP itself (libgomp is already loaded as libdnnl's dependency).
// Null when oneDNN was built with another threading runtime; then it needs no limiting.
using OmpSetNumThreads = void (*)(int);
OmpSetNumThreads omp_set_num_threads_fn() {
  static const OmpSetNumThreads fn =
      reinterpret_cast<OmpSetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return fn;
}

// The OpenMP thread limit is per calling thread: set it once on every thread that runs blocks.
void make_onednn_single_threaded() {
  thread_local bool done = false;
  if (done) return;
  if (OmpSetNumThreads fn = omp_set_num_threads_fn()) fn(1);
  done = true;
}

// Rows per sgemm call: the call's output (kSubRows x n floats) stays in L2 for the epilogue.
constexpr std::int64_t kSubRows = 1024;

// PyTorch's default GELU (approximate='none'): x * Phi(x) with the exact erf.
inline float gelu(float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); }

// The epilogue over one row (bias, activation, residual in that order: common/op.h).
void epilogue_row(float* __restrict row, const float* __restrict b, const float* __restrict res,
                  std::int64_t n, Epilogue e) {
  const bool bias = has_bias(e), relu = has_relu(e);
  if (bias && relu) {
    for (std::int64_t c = 0; c < n; ++c) row[c] = std::max(row[c] + b[c], 0.0f);
  } else if (bias && has_gelu(e)) {
    for (std::int64_t c = 0; c < n; ++c) row[c] = gelu(row[c] + b[c]);
  } else if (bias && has_residual(e)) {
    for (std::int64_t c = 0; c < n; ++c) row[c] += b[c] + res[c];
  } else if (bias) {
    for (std::int64_t c = 0; c < n; ++c) row[c] += b[c];
  } else if (relu) {
    for (std::int64_t c = 0; c < n; ++c) row[c] = std::max(row[c], 0.0f);
  }
}

void run_block(const float* x, const float* w, const float* bias, const float* residual, float* y,
               std::int64_t rows, std::int64_t k, std::int64_t n, Epilogue epilogue) {
  make_onednn_single_threaded();
  for (std::int64_t r0 = 0; r0 < rows; r0 += kSubRows) {
    const std::int64_t r = std::min(kSubRows, rows - r0);
    const dnnl_status_t st = dnnl_sgemm('N', 'N', r, n, k, 1.0f, x + r0 * k, k, w, n, 0.0f, y + r0 * n, n);
    if (st != dnnl_success) throw Error("gemm: dnnl_sgemm failed with status " + std::to_string(static_cast<int>(st)));
    if (epilogue == Epilogue::none) continue;
    for (std::int64_t i = 0; i < r; ++i)
      epilogue_row(y + (r0 + i) * n, bias, residual ? residual + (r0 + i) * n : nullptr, n, epilogue);
  }
}

void check(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
           std::span<const float> residual, std::span<float> y, const GemmDims& d, Epilogue epilogue) {
  if (d.m < 0 || d.k < 0 || d.n < 0) {
    throw InputError("gemm: dims", "negative m/k/n " + std::to_string(d.m) + "/" +
                                       std::to_string(d.k) + "/" + std::to_string(d.n));
  }
  auto need = [](const char* what, std::size_t have, std::int64_t want, const char* formula) {
    if (static_cast<std::int64_t>(have) < want) {
      throw InputError(std::string("gemm: ") + what, std::to_string(have) + " floats, need " +
                                                          formula + " = " + std::to_string(want));
    }
  };
  need("X", x.size(), d.m * d.k, "m * k");
  need("W", w.size(), d.k * d.n, "k * n");
  need("Y", y.size(), d.m * d.n, "m * n");
  if (has_bias(epilogue)) need("bias", bias.size(), d.n, "n");
  if (has_residual(epilogue)) need("residual", residual.size(), d.m * d.n, "m * n");
}

}  // namespace

void gemm(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
          std::span<float> y, const GemmDims& dims, Epilogue epilogue,
          std::span<const float> residual) {
  check(x, w, bias, residual, y, dims, epilogue);
  const std::int64_t m = dims.m, k = dims.k, n = dims.n;
  if (m == 0 || n == 0) return;
  const float* res = has_residual(epilogue) ? residual.data() : nullptr;
  if (k == 0) {  // empty sum: Y is the epilogue applied to zeros (oneDNN rejects k = 0)
    std::fill(y.begin(), y.begin() + m * n, 0.0f);
    for (std::int64_t r = 0; r < m; ++r) epilogue_row(y.data() + r * n, bias.data(), res ? res + r * n : nullptr, n, epilogue);
    return;
  }
  const std::int64_t threads = std::max(1, tbb::this_task_arena::max_concurrency());
  const std::int64_t block_rows = std::clamp((m + threads * kBlocksPerThread - 1) /
                                                 (threads * kBlocksPerThread),
                                             kMinBlockRows, kMaxBlockRows);
  const std::int64_t blocks = (m + block_rows - 1) / block_rows;
  try {
    if (blocks == 1 || threads == 1) {
      run_block(x.data(), w.data(), bias.data(), res, y.data(), m, k, n, epilogue);
      return;
    }
    tbb::parallel_for(std::int64_t{0}, blocks, [&](std::int64_t b) {
      const std::int64_t r0 = b * block_rows;
      const std::int64_t rows = std::min(block_rows, m - r0);
      run_block(x.data() + r0 * k, w.data(), bias.data(), res ? res + r0 * n : nullptr, y.data() + r0 * n, rows, k, n,
                epilogue);
    }, tbb::simple_partitioner{});
  } catch (const std::bad_alloc&) {
    throw Error("gemm: out of memory");
  }
}

}  // namespace dype::kernels::cpu
