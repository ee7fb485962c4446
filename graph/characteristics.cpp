#include "graph/characteristics.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"

namespace dype::kernels {
namespace {

// Degree statistics. The Gini coefficient of sorted x_1..x_n is
//   G = sum_i (2i - n - 1) x_(i) / (n sum x);
// a histogram of degree values gives the ranks of each value as one contiguous block, and a block
// of c equal values v starting after rank r contributes v * c * (2r + c - n). O(n + max degree).
void fill_stats(std::span<const std::int64_t> degrees, GraphCharacteristics& out) {
  const auto n = static_cast<std::int64_t>(degrees.size());
  out.nodes = n;
  if (n == 0) return;
  std::int64_t total = 0;
  std::int64_t lo = degrees[0];
  std::int64_t hi = degrees[0];
  std::int64_t isolated = 0;
  long double sum_sq = 0;
  for (std::int64_t d : degrees) {
    if (d < 0) throw InputError("degrees", "negative degree " + std::to_string(d));
    total += d;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    isolated += (d == 0) ? 1 : 0;
    sum_sq += static_cast<long double>(d) * d;
  }
  out.nnz = total;
  out.min_degree = lo;
  out.max_degree = hi;
  out.isolated_nodes = isolated;
  const auto nd = static_cast<long double>(n);
  out.density = static_cast<double>(static_cast<long double>(total) / (nd * nd));
  const long double mean = static_cast<long double>(total) / nd;
  out.mean_degree = static_cast<double>(mean);
  if (total == 0) return;
  out.degree_skew = degree_skew(hi, n, total);
  const long double var = std::max(0.0L, sum_sq / nd - mean * mean);
  out.degree_cv = static_cast<double>(std::sqrt(var) / mean);

  std::vector<std::int64_t> histogram(static_cast<std::size_t>(hi - lo) + 1, 0);
  for (std::int64_t d : degrees) ++histogram[static_cast<std::size_t>(d - lo)];
  long double acc = 0;
  std::int64_t rank = 0;  // nodes with a smaller degree
  for (std::size_t k = 0; k < histogram.size(); ++k) {
    const std::int64_t c = histogram[k];
    if (c == 0) continue;
    const auto v = static_cast<long double>(lo + static_cast<std::int64_t>(k));
    acc += v * static_cast<long double>(c) * static_cast<long double>(2 * rank + c - n);
    rank += c;
  }
  out.degree_gini = static_cast<double>(acc / (nd * static_cast<long double>(total)));
}

template <typename Index>
GraphCharacteristics characterize_csr(const CsrView<Index>& m) {
  if (m.rows < 0 || static_cast<std::int64_t>(m.indptr.size()) != m.rows + 1) {
    throw InputError("csr", "indptr has " + std::to_string(m.indptr.size()) + " entries for " +
                                std::to_string(m.rows) + " rows");
  }
  std::vector<std::int64_t> degrees(static_cast<std::size_t>(m.rows));
  std::int64_t loops = 0;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    degrees[ur] = static_cast<std::int64_t>(m.indptr[ur + 1]) - m.indptr[ur];
    for (auto k = m.indptr[ur]; k < m.indptr[ur + 1]; ++k) {
      loops += (static_cast<std::int64_t>(m.indices[static_cast<std::size_t>(k)]) == r) ? 1 : 0;
    }
  }
  GraphCharacteristics c;
  fill_stats(degrees, c);
  c.self_loops = loops;
  if (m.rows > 0 && m.cols > 0) {
    c.density = static_cast<double>(static_cast<long double>(c.nnz) /
                                    (static_cast<long double>(m.rows) * m.cols));
  }
  return c;
}

}  // namespace

GraphCharacteristics characterize(const EdgeList& graph, DegreeKind kind) {
  const auto& ends = kind == DegreeKind::in ? graph.dst : graph.src;
  if (graph.src.size() != graph.dst.size()) {
    throw InputError("edge list", std::to_string(graph.src.size()) + " sources but " +
                                      std::to_string(graph.dst.size()) + " destinations");
  }
  std::vector<std::int64_t> degrees(static_cast<std::size_t>(std::max<std::int64_t>(0, graph.num_nodes)));
  std::int64_t loops = 0;
  for (std::size_t e = 0; e < ends.size(); ++e) {
    const std::int64_t v = ends[e];
    if (v < 0 || v >= graph.num_nodes) {
      throw InputError("edge " + std::to_string(e),
                       "node " + std::to_string(v) + " out of range [0, " +
                           std::to_string(graph.num_nodes) + ")");
    }
    ++degrees[static_cast<std::size_t>(v)];
    loops += (graph.src[e] == graph.dst[e]) ? 1 : 0;
  }
  GraphCharacteristics c;
  fill_stats(degrees, c);
  c.self_loops = loops;
  return c;
}

GraphCharacteristics characterize(const CsrView<std::int32_t>& matrix) {
  return characterize_csr(matrix);
}

GraphCharacteristics characterize(const CsrView<std::int64_t>& matrix) {
  return characterize_csr(matrix);
}

GraphCharacteristics characterize_degrees(std::span<const std::int64_t> degrees) {
  GraphCharacteristics c;
  fill_stats(degrees, c);
  return c;
}

double degree_skew(std::int64_t max_degree, std::int64_t nodes, std::int64_t total) {
  if (nodes <= 0 || total <= 0) return 0.0;
  return static_cast<double>(max_degree) * static_cast<double>(nodes) / static_cast<double>(total);
}

double degree_skew(std::span<const std::int32_t> indptr) {
  const auto rows = static_cast<std::int64_t>(indptr.size()) - 1;
  if (rows <= 0) return 0.0;
  std::int64_t max_row = 0;
  for (std::size_t r = 0; r + 1 < indptr.size(); ++r) max_row = std::max<std::int64_t>(max_row, indptr[r + 1] - indptr[r]);
  return degree_skew(max_row, rows, static_cast<std::int64_t>(indptr.back()) - indptr.front());
}

OpShape spmm_shape(const GraphCharacteristics& c, std::int64_t feature_len) {
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = c.nodes;
  s.k = c.nodes;
  s.n = feature_len;
  s.nnz = c.nnz;
  s.degree_skew = c.degree_skew;
  return s;
}

OpShape spmm_shape(const CsrView<std::int32_t>& a, std::int64_t feature_len, double degree_skew,
                   const GatherLocality& locality) {
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = a.rows;
  s.k = a.cols;
  s.n = feature_len;
  s.nnz = a.nnz();
  s.degree_skew = degree_skew;
  s.locality = locality;
  return s;
}

}  // namespace dype::kernels
