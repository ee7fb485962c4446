#pragma once
// The vocabulary of operations shared by kernels, devices, performance models and the scheduler:
// what an operation is (OpKind) and the data characteristics of one invocation (OpShape).
#include <cstdint>
#include <optional>
#include <string_view>

namespace dype::kernels {

enum class OpKind : std::uint8_t {
  spmm,              // Y[m,n] = A[m,k] (CSR, nnz) * X[k,n]
  gemm,              // Y[m,n] = X[m,k] * W[k,n] (+ bias, ReLU)
  window_attention,  // multi-head sliding-window attention over seq_len tokens, band |i-j| <= w/2
  softmax,           // row softmax over [m,n]
  layer_norm,        // row layer norm over [m,n]
};

// What a GEMM does after the product, in this order: add a bias row [n], apply an activation (ReLU,
// or GELU with erf as PyTorch's default), add a residual [m x n] (a transformer's skip connection).
// Here, not in kernels/cpu/gemm.h, because every backend's GEMM and hw::KernelLaunch speak it.
enum class Epilogue : std::uint8_t { none, bias, relu, bias_relu, bias_gelu, bias_residual };

constexpr bool has_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::bias_relu || e == Epilogue::bias_gelu ||
         e == Epilogue::bias_residual;
}
constexpr bool has_relu(Epilogue e) { return e == Epilogue::relu || e == Epilogue::bias_relu; }
constexpr bool has_gelu(Epilogue e) { return e == Epilogue::bias_gelu; }
constexpr bool has_residual(Epilogue e) { return e == Epilogue::bias_residual; }

inline constexpr OpKind kAllOpKinds[] = {OpKind::spmm, OpKind::gemm, OpKind::window_attention,
                                         OpKind::softmax, OpKind::layer_norm};

constexpr std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::spmm: return "spmm";
    case OpKind::gemm: return "gemm";
    case OpKind::window_attention: return "window_attention";
    case OpKind::softmax: return "softmax";
    case OpKind::layer_norm: return "layer_norm";
  }
  return "unknown";
}

constexpr std::optional<OpKind> op_kind_from_string(std::string_view name) {
  for (OpKind kind : kAllOpKinds) {
    if (to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

// Data characteristics of one kernel invocation: everything a performance model may look at.
// SpMM: A is [m x k] with nnz entries, dense operand [k x n] (n = feature length).
// GEMM: [m x k] * [k x n]. Window attention: seq_len tokens, window w, heads x head_dim.
struct OpShape {
  OpKind kind = OpKind::gemm;
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t n = 0;
  std::int64_t nnz = 0;
  std::int64_t seq_len = 0;
  std::int64_t window = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  // Ratio of the largest row's nnz to the mean row nnz (1 = uniform); 0 when unknown.
  double degree_skew = 0.0;

  double density() const {
    return (m > 0 && k > 0) ? static_cast<double>(nnz) / (static_cast<double>(m) * k) : 0.0;
  }
};

}  // namespace dype::kernels
