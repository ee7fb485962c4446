#pragma once
// Every layer's activations of one GNN (GCN, GIN or GraphSAGE) over one DynamicGraph, kept so that
// after an update only what the update reaches is recomputed, and the answer stays exact.
//
// Each layer is written as PyG computes it, the dense product first: P = h W (GCN's lin, GIN's
// first MLP layer, SAGE's lin_l), then the aggregation over in-neighbours
//     raw[u] = sum_j c(u, j) Z[j] + self * Z[u],   Z[j] = P[j] * zscale[j]
// and a row-local finish: GCN  act(raw[u] / sqrt(d_u) + b)            (Z = P / sqrt(d_j))
//                         GIN  MLP2(act(raw[u] + b1))                  (self = 1 + eps)
//                         SAGE act(raw[u] / indeg(u) + h[u] W_r + b)
// c(u, j) counts the edges j -> u (GCN: loops replaced by one self loop, d = 1 + other in-edges).
// raw is kept unscaled, so a degree change rescales a row without summing it again, and an update
// changes raw by differences only: the edges added or removed carry their source's old Z, the
// columns whose Z changed carry the difference to each out-neighbour. A row that took many such
// differences is summed afresh (kRefreshAfter), so rounding cannot drift.
//
//   rt::DynamicGraph g(edges, x);
//   rt::IncrementalGnn gnn(model, g);                  // the whole forward, every layer kept
//   rt::GraphChange c = g.apply(update);
//   rt::IncrementalStats s = gnn.update(g, c);         // s.rows[l]: rows recomputed in layer l
//   rt::HostTensor y = gnn.rows({0, 5, 9});            // == reference_forward rows, within 1e-5
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/incremental/dynamic_graph.h"
#include "runtime/model.h"

namespace dype::rt {

// What one incremental update recomputed: per layer, the rows whose output changed and the
// adjacency entries read (the touched subgraph's nnz), the work the update cost.
struct IncrementalStats {
  std::vector<std::int64_t> rows;       // per layer
  std::vector<std::int64_t> nnz;        // per layer
  std::vector<std::int64_t> projected;  // per layer: rows whose dense product (P = h W) was redone
  std::int64_t refreshed = 0;           // rows summed afresh against drift
  bool rebuilt = false;                 // a bulk update: every layer recomputed whole
  // The rows of the answer that changed (the last layer's), ascending.
  std::vector<std::int32_t> changed;
};

class IncrementalGnn {
 public:
  // After this many difference updates a row's sum is recomputed from its neighbours.
  static constexpr std::uint16_t kRefreshAfter = 64;

  // The whole forward of `model` (a GNN) over `graph`'s stored features. InputError when the model
  // is a transformer or the feature width is not the model's.
  IncrementalGnn(std::shared_ptr<const Model> model, const DynamicGraph& graph);

  // Brings every layer to `graph`, to which `change` was just applied (and nothing since).
  IncrementalStats update(const DynamicGraph& graph, const GraphChange& change);
  // What update(graph, change) would recompute for `model`, without computing it: the same rows,
  // entries and changed nodes per layer (rows refreshed against drift aside), so the cost of
  // keeping activations can be priced while none are kept.
  static IncrementalStats reach(const Model& model, const DynamicGraph& graph,
                                const GraphChange& change);
  // Whether `change` is bulk enough that update() recomputes every layer whole instead.
  static bool rebuilds(const GraphChange& change);

  std::int64_t nodes() const { return out_.rows; }
  const HostTensor& output() const { return out_; }
  // Rows of the output in the order given (InputError naming node_ids[i] when one is out of range).
  HostTensor rows(std::span<const std::int64_t> ids) const;
  std::size_t bytes() const;
  // What the caches of `model` over `nodes` nodes take, before building them.
  static std::size_t bytes_for(const Model& model, std::int64_t nodes);

 private:
  struct Layer {
    std::int64_t in = 0, width = 0;  // h's width, P's (and raw's) width
    std::span<const float> wa, wr;   // P = h wa; SAGE: h wr (the self half)
    std::span<const float> b;        // bias added to the aggregate (GIN: the first MLP layer's)
    kernels::Epilogue act = kernels::Epilogue::none;  // GCN, SAGE: the layer's; GIN: mlp1's
    std::span<const float> w2, b2;                    // GIN: the second MLP layer
    kernels::Epilogue act2 = kernels::Epilogue::none;
    std::int64_t out = 0;               // the layer's output width
    std::vector<float> p, raw, q;       // [nodes x width]; q: SAGE's h wr
    std::vector<float> zscale;          // GCN: 1 / sqrt(d); unused otherwise
    std::vector<std::uint16_t> deltas;  // differences taken since the row was last summed
  };

  float self_weight() const;
  float row_scale(const DynamicGraph& g, std::int64_t u) const;
  float column_scale(const DynamicGraph& g, std::int64_t j) const;
  // raw[u] summed from u's in-neighbours; returns the entries read.
  std::int64_t sum_row(const DynamicGraph& g, Layer& L, std::int64_t u) const;
  // The layer's output rows `rows` from raw (and q) into y [rows x out].
  void finish(const DynamicGraph& g, const Layer& L, std::span<const std::int32_t> rows,
              std::vector<float>& y) const;
  // P (and q) of rows `rows` of h = `h` [rows x L.in].
  void project(const Layer& L, std::span<const float> h, std::int64_t count, std::vector<float>& p,
               std::vector<float>& q) const;
  void resize(std::int64_t nodes);

  std::shared_ptr<const Model> model_;
  std::vector<Layer> layers_;
  HostTensor out_;
  std::vector<std::uint32_t> mark_;  // per node: the stamp of the set it was last put in
  std::uint32_t stamp_ = 0;
};

}  // namespace dype::rt
