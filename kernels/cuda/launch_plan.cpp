#include "kernels/cuda/launch_plan.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace dype::kernels::cuda {

namespace {
int to_int(std::int64_t v, const char* what) {
  if (v < 0) throw InputError("cuda gemm", std::string(what) + " is negative: " + std::to_string(v));
  if (v > std::numeric_limits<int>::max()) {
    throw InputError("cuda gemm", std::string(what) + "=" + std::to_string(v) +
                                      " exceeds cuBLAS's 32-bit dimension limit");
  }
  return static_cast<int>(v);
}
}  // namespace

ColMajorGemm row_major_gemm_args(std::int64_t m, std::int64_t k, std::int64_t n) {
  ColMajorGemm g;
  g.rows = to_int(n, "n");
  g.cols = to_int(m, "m");
  g.inner = to_int(k, "k");
  // Leading dimensions must be >= 1 even for empty matrices (cuBLAS rejects 0).
  g.lda = std::max(1, g.rows);   // W is k x n row-major: column-major n x k, ld n
  g.ldb = std::max(1, g.inner);  // X is m x k row-major: column-major k x m, ld k
  g.ldc = std::max(1, g.rows);   // Y is m x n row-major: column-major n x m, ld n
  return g;
}

Grid epilogue_grid(std::int64_t m, std::int64_t n, unsigned block, unsigned max_blocks) {
  Grid g;
  g.block = block;
  const std::int64_t elems = std::max<std::int64_t>(0, m) * std::max<std::int64_t>(0, n);
  const std::int64_t blocks = (elems + block - 1) / block;
  g.grid_x = static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, max_blocks));
  return g;
}

Grid softmax_grid(std::int64_t m, std::int64_t n) {
  if (m > std::numeric_limits<int>::max()) throw InputError("cuda softmax", "too many rows: " + std::to_string(m));
  Grid g;
  g.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, m));
  // A warp per 32 columns up to 256 threads: short rows do not waste idle threads.
  const std::int64_t warps = std::clamp<std::int64_t>((n + 31) / 32, 1, 8);
  g.block = static_cast<unsigned>(warps * 32);
  g.shared_bytes = 2 * 8 * sizeof(float);  // per-warp partial max and sum
  return g;
}


Grid window_attention_grid(const WindowDims& d, std::size_t max_shared_bytes) {
  if (d.seq_len < 0 || d.heads < 1 || d.head_dim < 1 || d.window < 0) {
    throw InputError("cuda window_attention", "need seq_len >= 0, heads >= 1, head_dim >= 1, window >= 0");
  }
  if (d.heads > 65535) throw InputError("cuda window_attention", "heads=" + std::to_string(d.heads) + " exceeds the grid y limit 65535");
  if (d.seq_len > std::numeric_limits<int>::max()) throw InputError("cuda window_attention", "seq_len too large");
  Grid g;
  g.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, d.seq_len));
  g.grid_y = static_cast<unsigned>(d.heads);
  g.block = 128;  // 4 warps: each warp scores one key at a time, lanes over head_dim
  const std::int64_t band = window_band(d.seq_len, d.window);
  g.shared_bytes = static_cast<std::size_t>(band + d.head_dim + 8) * sizeof(float);
  if (g.shared_bytes > max_shared_bytes) {
    throw InputError("cuda window_attention",
                     "window=" + std::to_string(d.window) + " with head_dim=" + std::to_string(d.head_dim) +
                         " needs " + std::to_string(g.shared_bytes) + " bytes of shared memory, limit " +
                         std::to_string(max_shared_bytes));
  }
  return g;
}

std::string_view to_string(ErrorClass c) {
  switch (c) {
    case ErrorClass::no_device: return "no_device";
    case ErrorClass::out_of_memory: return "out_of_memory";
    case ErrorClass::invalid_argument: return "invalid_argument";
    case ErrorClass::unsupported: return "unsupported";
    case ErrorClass::fatal: return "fatal";
  }
  return "fatal";
}

ErrorClass classify_cuda_error(int code) {
  switch (code) {
    case 3:    // cudaErrorInitializationError
    case 34:   // cudaErrorStubLibrary (libcuda stub, no driver)
    case 35:   // cudaErrorInsufficientDriver
    case 100:  // cudaErrorNoDevice
    case 101:  // cudaErrorInvalidDevice
    case 803:  // cudaErrorSystemDriverMismatch
    case 804:  // cudaErrorCompatNotSupportedOnDevice
      return ErrorClass::no_device;
    case 2: return ErrorClass::out_of_memory;  // cudaErrorMemoryAllocation
    case 1:    // cudaErrorInvalidValue
    case 9:    // cudaErrorInvalidConfiguration
    case 17:   // cudaErrorInvalidDevicePointer
    case 21:   // cudaErrorInvalidMemcpyDirection
      return ErrorClass::invalid_argument;
    case 209:  // cudaErrorNoKernelImageForDevice (built for sm_80/sm_90 only)
    case 217:  // cudaErrorPeerAccessUnsupported
    case 801:  // cudaErrorNotSupported
      return ErrorClass::unsupported;
    default: return ErrorClass::fatal;
  }
}

ErrorClass classify_cublas_status(int code) {
  switch (code) {
    case 1: return ErrorClass::no_device;       // CUBLAS_STATUS_NOT_INITIALIZED
    case 3: return ErrorClass::out_of_memory;   // CUBLAS_STATUS_ALLOC_FAILED
    case 7: return ErrorClass::invalid_argument;  // CUBLAS_STATUS_INVALID_VALUE
    case 8:                                     // CUBLAS_STATUS_ARCH_MISMATCH
    case 15: return ErrorClass::unsupported;    // CUBLAS_STATUS_NOT_SUPPORTED
    default: return ErrorClass::fatal;
  }
}

ErrorClass classify_cusparse_status(int code) {
  switch (code) {
    case 1: return ErrorClass::no_device;        // CUSPARSE_STATUS_NOT_INITIALIZED
    case 2:                                      // CUSPARSE_STATUS_ALLOC_FAILED
    case 11: return ErrorClass::out_of_memory;   // CUSPARSE_STATUS_INSUFFICIENT_RESOURCES
    case 3: return ErrorClass::invalid_argument;  // CUSPARSE_STATUS_INVALID_VALUE
    case 4:                                      // CUSPARSE_STATUS_ARCH_MISMATCH
    case 10: return ErrorClass::unsupported;     // CUSPARSE_STATUS_NOT_SUPPORTED
    default: return ErrorClass::fatal;
  }
}


}  // namespace dype::kernels::cuda
