#pragma once
// Pure host-side planning for the CUDA backend: cuBLAS argument packing for row-major GEMM, launch
// geometry of the own kernels, and the mapping of CUDA / cuBLAS / cuSPARSE status codes to dype
// errors. No CUDA headers here, so this builds and is tested on machines without the toolkit; the
// numeric codes are checked against the real headers by static_asserts in hw/cuda/cuda_device.cpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/gpu/launch_plan.h"

namespace dype::kernels::cuda {

// cuBLAS is column-major. A row-major matrix read column-major is its transpose, so row-major
// Y[m x n] = X[m x k] W[k x n] is computed as the column-major Y^T = W^T X^T without copies:
// cublasSgemm(N, N, rows=n, cols=m, inner=k, A=W (lda=n), B=X (ldb=k), C=Y (ldc=n)).
struct ColMajorGemm {
  int rows = 0;   // cuBLAS m: rows of op(A) and C (column-major) = n of the row-major problem
  int cols = 0;   // cuBLAS n: columns of op(B) and C = m of the row-major problem
  int inner = 0;  // cuBLAS k
  int lda = 0, ldb = 0, ldc = 0;
  // A is the row-major W, B the row-major X.
};
// Throws InputError when a size is negative or exceeds cuBLAS's 32-bit int.
ColMajorGemm row_major_gemm_args(std::int64_t m, std::int64_t k, std::int64_t n);

using gpu::Activation;
using gpu::Grid;
using gpu::WindowDims;
using gpu::window_band;
using gpu::ErrorClass;
using gpu::format_error;

// Bias/ReLU epilogue over y[m x n]: a 1-D grid-stride loop; the grid is capped so very large
// outputs do not need more blocks than the device schedules at once.
Grid epilogue_grid(std::int64_t m, std::int64_t n, unsigned block = 256, unsigned max_blocks = 65535);

// Row softmax over x[m x n]: one block per row (grid_x = m), block threads reduce across columns.
Grid softmax_grid(std::int64_t m, std::int64_t n);

// Sliding-window attention: one block per (query row, head); shared memory holds the row's band
// of scores and the query vector. Band = 2 * (window / 2) + 1 keys, clipped to seq_len.
// Throws InputError when heads exceed the grid's y limit or the band does not fit in
// max_shared_bytes (then the window is too wide for the single-pass kernel).
Grid window_attention_grid(const WindowDims& d, std::size_t max_shared_bytes = 48 * 1024);

std::string_view to_string(ErrorClass c);

// Codes as in cuda_runtime_api.h / cublas_api.h / cusparse.h.
ErrorClass classify_cuda_error(int code);
ErrorClass classify_cublas_status(int code);
ErrorClass classify_cusparse_status(int code);


}  // namespace dype::kernels::cuda
