#pragma once
// The part of a normalised graph a k-layer GNN reads to answer some of its nodes: their k-hop
// in-neighbourhood (PyG's k_hop_subgraph, flow source -> target), with each row that matters
// keeping the whole graph's entries (GCN's D^-1/2 weights of the whole graph, SAGE's mean over
// every in-neighbour), so a forward over it gives those nodes' exact answers at a fraction of the
// work.
//
// A row is copied when its node's output is read at some layer (the (k-1)-hop set); the nodes only
// read as inputs (the k-th hop) keep empty rows, since nothing reads what they compute. The
// subgraph is an ordinary request graph: its nodes and nnz are what the performance models and the
// planner see, so a stream of small answers plans like the small graphs it is.
//
//   rt::ComputationSubgraph s = rt::computation_subgraph(*normalised, node_ids,
//   model.spec().layers); rt::Request r = rt::Request::gnn(s.graph, rt::take_rows(x, s.nodes));
//   r.set_rows_wanted(s.rows_wanted);        // == the whole graph's answer rows node_ids
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/incremental/dynamic_graph.h"
#include "runtime/model.h"

namespace dype::rt {

struct ComputationSubgraph {
  // Nodes relabelled 0.. in the order of `nodes`. Null when the answers read every node: the
  // graph itself is then the subgraph (`nodes` and `rows_wanted` are left empty), not a copy.
  std::shared_ptr<const Graph> graph;
  std::vector<std::int64_t> nodes;        // subgraph node i is graph node nodes[i] (ascending)
  std::vector<std::int64_t> rows_wanted;  // node_ids in the subgraph's numbering, in their order
};

// `node_ids` must be in [0, g.nodes) (callers check them against the request first); `layers` >= 1.
// Throws InputError when `g` is shape-only (no entries to copy).
ComputationSubgraph computation_subgraph(const Graph& g, std::span<const std::int64_t> node_ids,
                                         int layers);

// The size of the computation subgraph of `rows` over a graph that takes updates, without building
// it: its nodes, and its entries (each read node's in-edges and its own self entry). What the
// planner prices an answer through the engine at.
struct SubgraphSize {
  std::int64_t nodes = 0, nnz = 0;
};
SubgraphSize computation_subgraph_size(const DynamicGraph& g, std::span<const std::int32_t> rows,
                                       int layers);

}  // namespace dype::rt
