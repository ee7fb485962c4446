#include "graph/edge_index.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace dype::kernels {
namespace {

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k > 0) s += ", ";
    s += std::to_string(shape[k]);
  }
  return s + "]";
}

std::string range(std::int64_t n) { return " out of range [0, " + std::to_string(n) + ")"; }

// Min and max of ids in one branch-free pass (vectorises); the slow pass that finds the offending
// position only runs when the range check fails.
void min_max(std::span<const std::int64_t> ids, std::int64_t& lo, std::int64_t& hi) {
  lo = 0;
  hi = -1;
  if (ids.empty()) return;
  lo = ids[0];
  hi = ids[0];
  for (std::int64_t v : ids) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
}

// Throws for the first id outside [0, n); `where(k)` names position k.
template <typename Where>
void check_ids(std::span<const std::int64_t> ids, std::int64_t n, Where where) {
  std::int64_t lo = 0;
  std::int64_t hi = -1;
  min_max(ids, lo, hi);
  if (ids.empty() || (lo >= 0 && hi < n)) return;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int64_t v = ids[k];
    if (v < 0) throw InputError(where(k), "negative node id " + std::to_string(v));
    if (v >= n) throw InputError(where(k), "node " + std::to_string(v) + range(n));
  }
}

void check_values(std::span<const float> values, std::size_t expected, const char* field,
                  const char* per) {
  if (values.size() != expected) {
    throw InputError(field, std::to_string(values.size()) + " values for " +
                                std::to_string(expected) + " " + per);
  }
  // Finite check as one reduction first; x - x is NaN exactly for NaN and +-inf.
  float acc = 0.0f;
  for (float v : values) acc += v - v;
  if (!std::isnan(acc)) return;
  for (std::size_t k = 0; k < values.size(); ++k) {
    if (!std::isfinite(values[k])) {
      throw InputError(std::string(field) + "[" + std::to_string(k) + "]",
                       std::isnan(values[k]) ? "NaN" : "infinite value");
    }
  }
}

}  // namespace

std::int64_t validate_edge_index(std::span<const std::int64_t> edge_index,
                                 std::span<const std::int64_t> shape,
                                 std::optional<std::int64_t> num_nodes,
                                 std::optional<std::span<const float>> edge_weight) {
  if (shape.size() != 2 || shape[0] != 2 || shape[1] < 0) {
    throw InputError("edge_index", "shape " + shape_string(shape) + " must be [2, E]");
  }
  const std::int64_t e = shape[1];
  // Compare without computing 2 * E, which a hostile shape could overflow.
  if (edge_index.size() % 2 != 0 || static_cast<std::int64_t>(edge_index.size() / 2) != e) {
    throw InputError("edge_index", std::to_string(edge_index.size()) + " values for shape " +
                                       shape_string(shape) + " (expected 2 * " +
                                       std::to_string(e) + ")");
  }
  const auto ue = static_cast<std::size_t>(e);
  const auto src = edge_index.subspan(0, ue);
  const auto dst = edge_index.subspan(ue, ue);
  std::int64_t n = 0;
  if (num_nodes) {
    if (*num_nodes < 0) {
      throw InputError("num_nodes", std::to_string(*num_nodes) + " is negative");
    }
    n = *num_nodes;
  } else {
    // Infer as PyG does; negative ids are still reported by position below.
    std::int64_t lo = 0;
    std::int64_t hi = -1;
    std::int64_t lo2 = 0;
    std::int64_t hi2 = -1;
    min_max(src, lo, hi);
    min_max(dst, lo2, hi2);
    n = std::max(hi, hi2) + 1;
  }
  check_ids(src, n, [](std::size_t k) { return "edge_index[0][" + std::to_string(k) + "]"; });
  check_ids(dst, n, [](std::size_t k) { return "edge_index[1][" + std::to_string(k) + "]"; });
  if (edge_weight) check_values(*edge_weight, ue, "edge_weight", "edges");
  return n;
}

EdgeList edge_index_to_edge_list(std::span<const std::int64_t> edge_index,
                                 std::span<const std::int64_t> shape,
                                 std::optional<std::int64_t> num_nodes,
                                 std::optional<std::span<const float>> edge_weight) {
  EdgeList g;
  g.num_nodes = validate_edge_index(edge_index, shape, num_nodes, edge_weight);
  const auto e = static_cast<std::size_t>(shape[1]);
  g.src.assign(edge_index.begin(), edge_index.begin() + static_cast<std::ptrdiff_t>(e));
  g.dst.assign(edge_index.begin() + static_cast<std::ptrdiff_t>(e), edge_index.end());
  if (edge_weight) g.weight.assign(edge_weight->begin(), edge_weight->end());
  return g;
}

void validate_csr_input(std::span<const std::int64_t> indptr, std::span<const std::int64_t> indices,
                        std::int64_t num_nodes, std::optional<std::span<const float>> values) {
  if (num_nodes < 0) throw InputError("num_nodes", std::to_string(num_nodes) + " is negative");
  const auto rows = static_cast<std::size_t>(num_nodes);
  if (indptr.size() != rows + 1) {
    throw InputError("indptr", std::to_string(indptr.size()) + " entries for " +
                                   std::to_string(num_nodes) + " nodes (expected " +
                                   std::to_string(rows + 1) + ")");
  }
  if (indptr[0] != 0) {
    throw InputError("indptr[0]", "must be 0, got " + std::to_string(indptr[0]));
  }
  for (std::size_t r = 1; r <= rows; ++r) {
    if (indptr[r] < indptr[r - 1]) {
      throw InputError("indptr[" + std::to_string(r) + "]",
                       std::to_string(indptr[r]) + " < indptr[" + std::to_string(r - 1) + "] = " +
                           std::to_string(indptr[r - 1]) + " (indptr must not decrease)");
    }
  }
  if (indptr[rows] != static_cast<std::int64_t>(indices.size())) {
    throw InputError("indptr[" + std::to_string(rows) + "]",
                     "last entry " + std::to_string(indptr[rows]) + " != number of indices " +
                         std::to_string(indices.size()));
  }
  check_ids(indices, num_nodes,
            [](std::size_t k) { return "indices[" + std::to_string(k) + "]"; });
  if (values) check_values(*values, indices.size(), "values", "indices");
}

CsrI64 csr_input_to_csr(std::span<const std::int64_t> indptr,
                        std::span<const std::int64_t> indices, std::int64_t num_nodes,
                        std::optional<std::span<const float>> values) {
  validate_csr_input(indptr, indices, num_nodes, values);
  CsrI64 m;
  m.rows = num_nodes;
  m.cols = num_nodes;
  m.indptr.assign(indptr.begin(), indptr.end());
  m.indices.assign(indices.begin(), indices.end());
  if (values) {
    m.values.assign(values->begin(), values->end());
  } else {
    m.values.assign(indices.size(), 1.0f);
  }
  return m;
}

EdgeList csr_input_to_edge_list(std::span<const std::int64_t> indptr,
                                std::span<const std::int64_t> indices, std::int64_t num_nodes,
                                std::optional<std::span<const float>> values) {
  validate_csr_input(indptr, indices, num_nodes, values);
  EdgeList g;
  g.num_nodes = num_nodes;
  g.src.assign(indices.begin(), indices.end());
  g.dst.resize(indices.size());
  for (std::int64_t r = 0; r < num_nodes; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    std::fill(g.dst.begin() + indptr[ur], g.dst.begin() + indptr[ur + 1], r);
  }
  if (values) g.weight.assign(values->begin(), values->end());
  return g;
}

}  // namespace dype::kernels
