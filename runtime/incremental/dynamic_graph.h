#pragma once
// A registered graph that takes updates: its edges as adjacency lists both ways (a node's
// in-neighbours, which its aggregation row sums, and its out-neighbours, the rows a change of its
// features reaches), its node features, and a version that every applied update bumps.
//
// Edges are directed, source -> target, and counted with multiplicity as PyG counts them: adding
// an edge that is already there makes a second one; removing one takes away one occurrence.
// An update is checked whole before anything changes (InputError naming the field and position),
// so it applies completely or not at all.
//
//   rt::DynamicGraph g(edges, x);                        // x: [nodes x F], or no features (F = 0)
//   rt::GraphUpdate u;
//   u.add_src = {3}; u.add_dst = {7};
//   rt::GraphChange c = g.apply(u);                      // g.version() == 1
#include <cstdint>
#include <utility>
#include <vector>

#include "graph/edge_list.h"
#include "runtime/model.h"

namespace dype::rt {

// One update, in the order it applies: new nodes (with their feature rows), feature rows set,
// edges removed (from the graph before this update), edges added (their ids may name new nodes).
struct GraphUpdate {
  std::vector<std::int64_t> add_src, add_dst;        // add_edges [2, k]
  std::vector<std::int64_t> remove_src, remove_dst;  // remove_edges [2, k]
  std::int64_t add_nodes = 0;
  std::vector<float> add_x;            // [add_nodes x F]
  std::vector<std::int64_t> set_rows;  // [r]
  std::vector<float> set_x;            // [r x F]

  // Changes it makes: edges added and removed, nodes added, rows set (what updates/s counts).
  std::int64_t changes() const {
    return static_cast<std::int64_t>(add_src.size() + remove_src.size() + set_rows.size()) +
           add_nodes;
  }
};

// What an applied update changed, for the caches kept over the graph (incremental_gnn.h).
struct GraphChange {
  std::int64_t old_nodes = 0, new_nodes = 0;
  struct Edge {
    std::int32_t src, dst;
    std::int32_t delta;  // +1 added, -1 removed
  };
  std::vector<Edge> edges;
  std::vector<std::int32_t> feature_rows;  // rows set and new nodes, ascending, unique
};

class DynamicGraph {
 public:
  // (neighbour, number of edges) pairs, ascending by neighbour.
  using Adjacency = std::vector<std::pair<std::int32_t, std::int32_t>>;

  // Edge weights are not kept (an update has none): InputError when `edges` has them. x may be
  // empty (no stored features, cols 0); otherwise [edges.num_nodes x F] and finite.
  DynamicGraph(const kernels::EdgeList& edges, HostTensor x);

  std::int64_t nodes() const { return static_cast<std::int64_t>(in_.size()); }
  std::int64_t num_edges() const { return edges_; }
  std::int64_t feature_len() const { return x_.cols; }
  bool has_features() const { return x_.cols > 0; }
  const HostTensor& features() const { return x_; }
  std::uint64_t version() const { return version_; }
  // The version a graph read back from its snapshot had (GraphStore).
  void restore_version(std::uint64_t v) { version_ = v; }

  const Adjacency& in(std::int64_t node) const { return in_[static_cast<std::size_t>(node)]; }
  const Adjacency& out(std::int64_t node) const { return out_[static_cast<std::size_t>(node)]; }
  // Edges into `node`, loops and repeats included; of those, its loops.
  std::int64_t in_degree(std::int64_t node) const {
    return in_deg_[static_cast<std::size_t>(node)];
  }
  std::int32_t loops(std::int64_t node) const { return loops_[static_cast<std::size_t>(node)]; }

  // InputError naming the field as the protocol does ("add_edges[1][4]", "remove_edges[0]",
  // "add_nodes" for add_x, "set_rows[2]", "x" for set_x) when `u` cannot apply.
  void check(const GraphUpdate& u) const;
  // check(), then applies `u` and bumps the version.
  GraphChange apply(const GraphUpdate& u);

  // The current edges (by target, then source; repeats as separate edges), for normalisation.
  kernels::EdgeList edge_list() const;
  // What it holds, about (adjacency pairs, per-node vectors, features; not spare capacity).
  std::size_t bytes() const;
  // At most what bytes() would be for a graph of `nodes` nodes, `edges` edges and `features`
  // features per node, before building it (each edge makes at most one pair each way).
  static std::size_t bytes_for(std::int64_t nodes, std::int64_t edges, std::int64_t features);

 private:
  // +1 when a pair was inserted, -1 when one was erased, 0 otherwise.
  static int add(Adjacency& a, std::int32_t node, std::int32_t count);
  static std::int32_t count(const Adjacency& a, std::int32_t node);

  std::vector<Adjacency> in_, out_;
  std::vector<std::int64_t> in_deg_;
  std::vector<std::int32_t> loops_;
  std::int64_t edges_ = 0;
  std::int64_t pairs_ = 0;  // (neighbour, count) pairs in in_ and out_ together
  HostTensor x_;
  std::uint64_t version_ = 0;
};

}  // namespace dype::rt
