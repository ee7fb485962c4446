#pragma once
// Data characteristics of a graph, as the performance models and the drift detector see it:
// size, density and how skewed the degrees are. Computed in one pass over the edges (degree
// counts) plus one over the nodes (a degree histogram gives the Gini coefficient without a sort).
//
//   GraphCharacteristics c = characterize(edges);     // in-degrees: the rows SpMM aggregates
//   OpShape spmm = spmm_shape(c, /*feature_len=*/128);
#include <cstdint>
#include <span>

#include "common/csr.h"
#include "graph/edge_list.h"
#include "common/op.h"

namespace dype::kernels {

struct GraphCharacteristics {
  std::int64_t nodes = 0;
  std::int64_t nnz = 0;         // edges, counting repeats and self-loops
  double density = 0.0;         // nnz / nodes^2
  double mean_degree = 0.0;     // nnz / nodes
  std::int64_t max_degree = 0;
  std::int64_t min_degree = 0;
  double degree_skew = 0.0;     // max / mean (1 = regular graph; 0 when there are no edges)
  double degree_cv = 0.0;       // coefficient of variation: stddev / mean (population)
  double degree_gini = 0.0;     // 0 = all degrees equal, -> 1 = all edges on one node
  std::int64_t isolated_nodes = 0;  // degree 0 in the counted direction
  std::int64_t self_loops = 0;      // only known from edge lists (CSR: diagonal entries)
};

// Which degree to measure. SpMM on the adj_t CSR aggregates over in-edges, so `in` (edges per
// destination) is the row nnz that load balance depends on.
enum class DegreeKind : std::uint8_t { in, out };

GraphCharacteristics characterize(const EdgeList& graph, DegreeKind kind = DegreeKind::in);
// Row nnz of a CSR matrix (rows = nodes; density uses rows x cols).
GraphCharacteristics characterize(const CsrView<std::int32_t>& matrix);
GraphCharacteristics characterize(const CsrView<std::int64_t>& matrix);
// From a degree sequence alone (self_loops stays 0; density uses degrees.size()^2).
GraphCharacteristics characterize_degrees(std::span<const std::int64_t> degrees);

// Degree skew, the OpShape::degree_skew characteristic: max degree / mean degree, i.e.
// max_degree * nodes / total (1 = regular graph; 0 when there are no nodes or no edges). The one
// definition every module uses (graph characteristics, synthetic profiles, runtime graphs).
double degree_skew(std::int64_t max_degree, std::int64_t nodes, std::int64_t total);
// The same over a CSR's rows (row nnz = in-degree for SpMM's adj_t), in one pass over indptr.
double degree_skew(std::span<const std::int32_t> indptr);

// The SpMM invocation A[nodes x nodes] * X[nodes x feature_len] these characteristics describe.
OpShape spmm_shape(const GraphCharacteristics& c, std::int64_t feature_len);
// The SpMM A * X[cols x feature_len] of a real matrix, as the performance models read it, with its
// degree skew (degree_skew(a.indptr)) and gather locality (gather_locality.h), measured once by the
// caller for every feature length it asks about.
OpShape spmm_shape(const CsrView<std::int32_t>& a, std::int64_t feature_len, double degree_skew,
                   const GatherLocality& locality);

}  // namespace dype::kernels
