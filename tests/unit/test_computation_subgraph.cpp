// The computation subgraph of some nodes (runtime/incremental/computation_subgraph.h): a forward
// over it answers those nodes exactly as the whole graph's forward does (reference_forward, the
// kernels the pipeline runs), for GCN (whole-graph D^-1/2 weights), GIN and GraphSAGE (the
// interleaved mean matrix), two and three layers, in the order asked, repeats included; and it is
// smaller than the graph, which is the point.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "graph/generators.h"
#include "runtime/incremental/computation_subgraph.h"

namespace dype::rt {
namespace {

void check_rows(const ModelSpec& spec, std::vector<std::int64_t> ids) {
  const Model m = Model::make(spec);
  const std::int64_t n = 2000, f = spec.in_features;
  const auto g = graph_for_model(random_graph(n, 6000, 17), spec);
  const HostTensor x = make_tensor(n, f, kernels::generate_features(n, f, 3));
  const HostTensor whole = take_rows(reference_forward(m, Request::gnn(g, x)), ids);

  const ComputationSubgraph s = computation_subgraph(*g, ids, spec.layers);
  ASSERT_EQ(s.rows_wanted.size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(s.nodes[static_cast<std::size_t>(s.rows_wanted[i])], ids[i]);
  EXPECT_LT(s.graph->nodes, n / 2)
      << to_string(spec.family) << ": a few nodes' neighbourhood, not the graph";
  EXPECT_EQ(s.graph->rows_per_node, g->rows_per_node);
  const HostTensor part =
      take_rows(reference_forward(m, Request::gnn(s.graph, take_rows(x, s.nodes))), s.rows_wanted);
  EXPECT_LT(relative_error(part, whole), 1e-6)
      << to_string(spec.family) << " layers " << spec.layers;
}

TEST(ComputationSubgraph, GcnAnswersEqualWholeForward) {
  check_rows(
      {.family = ModelFamily::gcn, .layers = 2, .in_features = 12, .hidden = 16, .out_features = 5},
      {7, 1999, 0, 7, 512});
}

TEST(ComputationSubgraph, GinAnswersEqualWholeForward) {
  check_rows({.family = ModelFamily::gin,
              .layers = 2,
              .in_features = 12,
              .hidden = 16,
              .out_features = 5,
              .gin_eps = 0.25f},
             {3, 1500});
}

TEST(ComputationSubgraph, SageAnswersEqualWholeForward) {
  check_rows({.family = ModelFamily::sage,
              .layers = 2,
              .in_features = 12,
              .hidden = 16,
              .out_features = 5},
             {42, 43, 44});
}

TEST(ComputationSubgraph, ThreeLayersEqualWholeForward) {
  check_rows(
      {.family = ModelFamily::gcn, .layers = 3, .in_features = 8, .hidden = 12, .out_features = 4},
      {11});
}

TEST(ComputationSubgraph, OnlyTheRowsThatAreReadAreCopied) {
  // A path 0 -> 1 -> 2 -> 3 (GCN: each row also holds its self loop). Answering node 3 with two
  // layers reads rows 3 and 2 (hop 0 and 1); node 1 is an input only, so its row is empty.
  kernels::EdgeList e;
  e.num_nodes = 4;
  e.src = {0, 1, 2};
  e.dst = {1, 2, 3};
  const auto g = Graph::from_edges(e, /*gcn_norm=*/true);
  const std::vector<std::int64_t> ids = {3};
  const ComputationSubgraph s = computation_subgraph(*g, ids, 2);
  EXPECT_EQ(s.nodes, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(s.graph->indptr, (std::vector<std::int32_t>{0, 0, 2, 4}));
  EXPECT_EQ(s.graph->nnz, 4);
  EXPECT_EQ(s.rows_wanted, (std::vector<std::int64_t>{2}));
}

TEST(ComputationSubgraph, RefusesOutOfRangeAndShapeOnly) {
  const auto g = Graph::from_edges(random_graph(10, 20, 1), true);
  const std::vector<std::int64_t> bad = {10};
  EXPECT_THROW(computation_subgraph(*g, bad, 2), InputError);
  const std::vector<std::int64_t> ok = {1};
  EXPECT_THROW(computation_subgraph(*Graph::shape_only(10, 30), ok, 2), InputError);
}

}  // namespace
}  // namespace dype::rt
