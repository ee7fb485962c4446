#pragma once
// KernelLaunch: one kernel invocation for Device::launch — what to run (OpShape), on which
// buffers, with which options. Build one with the helpers below rather than by hand; they put the
// buffers in the order the op expects and fill the shape.
//
//   auto l = hw::KernelLaunch::spmm(indptr, indices, values, x, y, /*m=*/rows, /*k=*/cols,
//                                   /*n=*/feat, nnz, /*index_bytes=*/4);
//   hw::Event e = gpu.launch(l);
//
// Buffer order in `inputs` per op (all FP32 row-major unless stated):
//   spmm:             indptr [m+1], indices [nnz], values [nnz] (int32 or int64 per index_bytes),
//                     X [k x n]                                  -> output Y [m x n]
//   gemm:             X [m x k], W [k x n], bias [n] (only with a bias epilogue),
//                     residual [m x n] (only with bias_residual)  -> Y [m x n]
//   window_attention: Q, K, V [seq_len x heads*head_dim]        -> output same shape
//   softmax:          (none: in place on the output [m x n])     -> output [m x n]
//   layer_norm:       X [m x n], gamma [n], beta [n]            -> output [m x n]
#include <cstdint>
#include <string>
#include <vector>

#include "hw/buffer.h"
#include "common/op.h"

namespace dype::hw {

struct KernelLaunch {
  kernels::OpShape shape;
  std::vector<const Buffer*> inputs;
  Buffer* output = nullptr;
  kernels::Epilogue epilogue = kernels::Epilogue::none;  // gemm
  int index_bytes = 4;                                              // spmm: 4 or 8
  float eps = 1e-5f;                                                // layer_norm

  static KernelLaunch spmm(const Buffer& indptr, const Buffer& indices, const Buffer& values,
                           const Buffer& x, Buffer& y, std::int64_t m, std::int64_t k,
                           std::int64_t n, std::int64_t nnz, int index_bytes = 4,
                           double degree_skew = 0.0);
  // bias may be nullptr when the epilogue has no bias, residual unless it is bias_residual.
  static KernelLaunch gemm(const Buffer& x, const Buffer& w, const Buffer* bias, Buffer& y,
                           std::int64_t m, std::int64_t k, std::int64_t n,
                           kernels::Epilogue epilogue = kernels::Epilogue::none,
                           const Buffer* residual = nullptr);
  static KernelLaunch window_attention(const Buffer& q, const Buffer& k, const Buffer& v,
                                       Buffer& out, std::int64_t seq_len, std::int64_t heads,
                                       std::int64_t head_dim, std::int64_t window);
  static KernelLaunch softmax(Buffer& x, std::int64_t rows, std::int64_t cols);
  static KernelLaunch layer_norm(const Buffer& x, const Buffer& gamma, const Buffer& beta,
                                 Buffer& y, std::int64_t rows, std::int64_t cols,
                                 float eps = 1e-5f);
};

// Checks buffer count and sizes against the shape; throws InputError naming `where` (usually the
// device name), the argument and the sizes.
void validate(const KernelLaunch& launch, const std::string& where);

// "spmm m=.. k=.. n=.. nnz=.." — for tables and error messages.
std::string describe(const kernels::OpShape& shape);

}  // namespace dype::hw
