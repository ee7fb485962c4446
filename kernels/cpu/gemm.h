#pragma once
// Dense row-major GEMM Y = X W (+ bias) (ReLU | GELU) (+ residual) with the epilogue fused.
// Engine: oneDNN's matmul primitive (its own run-time ISA dispatch), bias and ReLU fused. Threads:
// rows are cut into blocks run as oneTBB tasks with oneDNN single-threaded inside each, so the
// oneTBB arena's concurrency (tbb::global_control, task_arena) is the thread count; libdnnl's
// OpenMP runtime never starts a team of its own.
#include <cstdint>
#include <span>

#include "common/op.h"

namespace dype::kernels::cpu {

using Epilogue = kernels::Epilogue;  // common/op.h

struct GemmDims {
  std::int64_t m = 0;  // rows of X and Y
  std::int64_t k = 0;  // cols of X, rows of W
  std::int64_t n = 0;  // cols of W and Y
};

// Y[m x n] = X[m x k] * W[k x n], then + bias[n], ReLU or GELU, + residual[m x n] as the epilogue
// says (common/op.h). bias and residual may be empty unless the epilogue uses them; residual may
// not alias Y. Throws InputError on undersized spans.
void gemm(std::span<const float> x, std::span<const float> w, std::span<const float> bias,
          std::span<float> y, const GemmDims& dims, Epilogue epilogue = Epilogue::none,
          std::span<const float> residual = {});

}  // namespace dype::kernels::cpu
