#pragma once
// Building the sparse matrices SpMM multiplies from a graph in coordinate form (EdgeList, PyG's
// edge_index [2, E] + optional edge_weight): plain CSR with duplicate and self-loop policies, the
// GCN normalised adjacency and the GIN aggregation matrix, with int32 or int64 indices.
//
// Orientation (PyG's adj_t, the same as graph/edge_index.h): edge src -> dst becomes entry
// (row dst, column src), so Y = A X sums at each node the features of its in-neighbours, as PyG's
// message passing does with flow "source_to_target".
//
//   EdgeList g = generate_rmat(1 << 16, 1 << 20, 42);
//   CsrI32 a = gcn_norm<std::int32_t>(g);                 // D^-1/2 (A + I) D^-1/2
//   CsrI64 b = to_csr<std::int64_t>(g, {.duplicates = DuplicateEdges::max});
//   cpu::spmm(a.view(), x, feature_len, y);
//
// Columns are sorted within each row. Every problem with the input raises InputError naming the
// field and position: "edge_index[1][17]: node 1000 out of range [0, 1000)".
#include <cstdint>

#include "common/csr.h"
#include "graph/edge_list.h"

namespace dype::kernels {

// What one entry (r, c) becomes when the edge list holds c -> r more than once.
enum class DuplicateEdges : std::uint8_t {
  sum,         // add the weights (a multigraph's SpMM result; PyG coalesce(reduce="sum"))
  keep_first,  // the weight of the first occurrence in edge order
  max,         // the largest weight (with unit weights: a simple graph, PyG to_undirected)
};

enum class SelfLoops : std::uint8_t {
  keep,         // as given
  remove,       // drop every i -> i
  add_missing,  // add i -> i with self_loop_weight where node i has none (PyG
                // add_remaining_self_loops: an existing loop keeps its weight)
  add,          // add i -> i with self_loop_weight to every node, merged with an existing loop
                // by the duplicate policy (with sum: A + w I)
};

struct CsrOptions {
  DuplicateEdges duplicates = DuplicateEdges::sum;
  SelfLoops self_loops = SelfLoops::keep;
  float self_loop_weight = 1.0f;
  // Also add dst -> src for every edge (an undirected graph), merged by the duplicate policy: an
  // edge present in both directions counts twice under sum, once under max / keep_first.
  bool symmetrize = false;
};

// Row-major adjacency [num_nodes x num_nodes], weights from edge.weight (1 when absent).
// Index = std::int32_t requires num_nodes and the resulting nnz to fit in int32 (InputError).
template <typename Index>
Csr<Index> to_csr(const EdgeList& edges, const CsrOptions& options = {});

enum class GcnNormalization : std::uint8_t {
  symmetric,    // D^-1/2 (A + I) D^-1/2 (Kipf & Welling; PyG gcn_norm)
  random_walk,  // D^-1 (A + I): each row averages its neighbourhood
};

struct GcnNormOptions {
  GcnNormalization normalization = GcnNormalization::symmetric;
  bool add_self_loops = true;  // PyG add_remaining_self_loops with fill_value
  float fill_value = 1.0f;
  bool symmetrize = false;     // see CsrOptions::symmetrize
  DuplicateEdges duplicates = DuplicateEdges::sum;
};

// PyG gcn_norm semantics: self loops added where missing (existing loops keep their weight),
// degree d_i = sum of weights of row i (in-edges of i, loop included), entry (r, c) weighted
// d_r^-1/2 w d_c^-1/2; a node of degree 0 gets d^-1/2 = 0 (no inf/NaN).
template <typename Index>
Csr<Index> gcn_norm(const EdgeList& edges, const GcnNormOptions& options = {});

// GIN aggregation matrix A + (1 + eps) I: Y = A X gives (1 + eps) x_i + sum over in-neighbours j
// of w_ji x_j (w = 1 for unweighted edges; an existing self loop adds to the diagonal).
template <typename Index>
Csr<Index> gin_adjacency(const EdgeList& edges, float eps = 0.0f, bool symmetrize = false);

// The checks every builder runs: num_nodes >= 0, src/dst/weight lengths agree, every node id in
// [0, num_nodes), every weight finite.
void validate_edge_list(const EdgeList& edges);

}  // namespace dype::kernels
