#pragma once
// The vocabulary of operations shared by kernels, devices, performance models and the scheduler:
// what an operation is (OpKind) and the data characteristics of one invocation (OpShape).
#include <array>
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

// How an SpMM's gathers of X rows reuse a cache: a miss-ratio curve over A's column indices walked
// in row order (the order the row kernels gather). miss[i] is the fraction of nonzeros whose X row
// is not among the most recently gathered rows(i) distinct rows, i.e. the miss ratio of an LRU cache
// of that many rows. Real graphs number related nodes together and reuse hub rows, so their curves
// sit far below a random graph's of the same shape. graph/gather_locality.h computes it;
// shape-only inputs (no indices) use uniform(), the curve of columns drawn uniformly at random.
struct GatherLocality {
  static constexpr int kLevels = 10;
  // Cache capacities in rows: 16, 64, ..., 4M (4^(i + 2)).
  static constexpr double rows(int i) { return static_cast<double>(std::int64_t{16} << (2 * i)); }
  std::array<float, kLevels> miss{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

  bool known() const { return miss[0] >= 0; }
  // Miss ratio of a cache holding `cache_rows` rows of X, interpolated in log(rows) between levels
  // (1 below one row, the last level's beyond 4M rows). Requires known().
  double miss_at(double cache_rows) const;
  // Columns drawn uniformly from k for nnz gathers: 1 - C / k above the compulsory share.
  static GatherLocality uniform(std::int64_t k, std::int64_t nnz);
};

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
  // SpMM: how A's column indices reuse X's rows (unknown for shape-only inputs).
  GatherLocality locality{};

  double density() const {
    return (m > 0 && k > 0) ? static_cast<double>(nnz) / (static_cast<double>(m) * k) : 0.0;
  }
};

}  // namespace dype::kernels
