// Incremental inference over a graph that takes updates: after every update of a long random
// sequence (edges added, edges removed, nodes added, feature rows set), the kept activations give
// the same answer as a whole forward over the updated graph (reference_forward, the kernels the
// pipeline runs, on graph_for_model's normalisation), for GCN, GIN and GraphSAGE. And updates that
// cannot apply are refused whole, naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "common/error.h"
#include "graph/generators.h"
#include "runtime/incremental/dynamic_graph.h"
#include "runtime/incremental/incremental_gnn.h"

namespace dype::rt {
namespace {

HostTensor whole_forward(const Model& m, const DynamicGraph& g) {
  return reference_forward(m, Request::gnn(graph_for_model(g.edge_list(), m.spec()), g.features()));
}

struct Mirror {  // the edges the test believes the graph has, to pick removals from
  std::vector<std::pair<std::int64_t, std::int64_t>> edges;
};

GraphUpdate random_update(std::mt19937_64& rng, const DynamicGraph& g, Mirror& mirror, std::int64_t f) {
  GraphUpdate u;
  const std::int64_t n = g.nodes();
  auto node = [&](std::int64_t limit) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(limit)); };
  const int kind = static_cast<int>(rng() % 10);
  if (kind == 0) {  // a new node with its row and an edge or two
    u.add_nodes = 1;
    for (std::int64_t c = 0; c < f; ++c) u.add_x.push_back(static_cast<float>(rng() % 2000) / 1000.0f - 1.0f);
    u.add_src = {n, node(n)};
    u.add_dst = {node(n), n};
  } else if (kind == 1) {  // feature rows set
    for (std::int64_t r : {node(n), node(n)}) {
      if (std::find(u.set_rows.begin(), u.set_rows.end(), r) != u.set_rows.end()) continue;
      u.set_rows.push_back(r);
      for (std::int64_t c = 0; c < f; ++c) u.set_x.push_back(static_cast<float>(rng() % 2000) / 1000.0f - 1.0f);
    }
  } else if (kind <= 5 && !mirror.edges.empty()) {  // removals (a loop or a repeat as it comes)
    const int k = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < k && !mirror.edges.empty(); ++i) {
      const std::size_t at = rng() % mirror.edges.size();
      u.remove_src.push_back(mirror.edges[at].first);
      u.remove_dst.push_back(mirror.edges[at].second);
      mirror.edges[at] = mirror.edges.back();
      mirror.edges.pop_back();
    }
  }
  const int adds = kind <= 5 ? static_cast<int>(rng() % 2) : 1 + static_cast<int>(rng() % 3);
  const std::int64_t m = n + u.add_nodes;
  for (int i = 0; i < adds; ++i) {
    const std::int64_t s = node(m), d = rng() % 8 == 0 ? s : node(m);  // some loops
    u.add_src.push_back(s);
    u.add_dst.push_back(d);
    if (rng() % 6 == 0) {  // a repeat of the edge just added
      u.add_src.push_back(s);
      u.add_dst.push_back(d);
    }
  }
  for (std::size_t i = 0; i < u.add_src.size(); ++i) mirror.edges.emplace_back(u.add_src[i], u.add_dst[i]);
  return u;
}

void check_sequence(const ModelSpec& spec, int updates) {
  const auto model = std::make_shared<const Model>(Model::make(spec));
  const std::int64_t n = 300, f = spec.in_features;
  kernels::EdgeList edges = random_graph(n, 1500, 11);
  Mirror mirror;
  for (std::int64_t e = 0; e < edges.num_edges(); ++e) mirror.edges.emplace_back(edges.src[e], edges.dst[e]);
  DynamicGraph g(edges, make_tensor(n, f, kernels::generate_features(n, f, 5)));
  IncrementalGnn gnn(model, g);
  ASSERT_LT(relative_error(gnn.output(), whole_forward(*model, g)), 1e-5);
  std::mt19937_64 rng(42);
  std::int64_t rows = 0;
  for (int i = 0; i < updates; ++i) {
    const GraphUpdate u = random_update(rng, g, mirror, f);
    const GraphChange change = g.apply(u);
    const IncrementalStats reached = IncrementalGnn::reach(*model, g, change);
    const IncrementalStats s = gnn.update(g, change);
    // What reach() says an update recomputes is what it recomputes (what prices keeping activations).
    ASSERT_EQ(reached.rows, s.rows) << "update " << i;
    ASSERT_EQ(reached.projected, s.projected) << "update " << i;
    ASSERT_EQ(reached.changed, s.changed) << "update " << i;
    for (std::size_t l = 0; l < s.nnz.size(); ++l) ASSERT_LE(reached.nnz[l], s.nnz[l]) << "refreshes only add";
    rows += s.rows.back();
    const double err = relative_error(gnn.output(), whole_forward(*model, g));
    ASSERT_LT(err, 1e-5) << to_string(spec.family) << " after update " << i << " (version " << g.version() << ")";
  }
  EXPECT_EQ(g.version(), static_cast<std::uint64_t>(updates));
  // Updates touch a neighbourhood, not the graph: with two layers over ~5 edges a node, on average
  // far fewer rows than nodes (three layers reach most of so small a graph).
  if (spec.layers == 2) {
    EXPECT_LT(rows / updates, g.nodes() / 4) << to_string(spec.family);
  }
}

TEST(IncrementalGnn, GcnEqualsWholeForwardAfterEveryUpdate) {
  check_sequence({.family = ModelFamily::gcn, .layers = 2, .in_features = 12, .hidden = 16, .out_features = 5}, 1000);
}

TEST(IncrementalGnn, GinEqualsWholeForwardAfterEveryUpdate) {
  check_sequence({.family = ModelFamily::gin, .layers = 2, .in_features = 12, .hidden = 16, .out_features = 5,
                  .gin_eps = 0.25f},
                 1000);
}

TEST(IncrementalGnn, SageEqualsWholeForwardAfterEveryUpdate) {
  check_sequence({.family = ModelFamily::sage, .layers = 2, .in_features = 12, .hidden = 16, .out_features = 5}, 1000);
}

TEST(IncrementalGnn, ThreeLayersWithGeluEqualWholeForward) {
  check_sequence({.family = ModelFamily::gcn, .layers = 3, .in_features = 8, .hidden = 12, .out_features = 4,
                  .activation = Nonlinearity::gelu},
                 300);
}

TEST(IncrementalGnn, BulkUpdateRecomputesWholeAndStaysExact) {
  const auto model = std::make_shared<const Model>(Model::gcn({.layers = 2, .in_features = 6, .hidden = 8, .out_features = 3}));
  DynamicGraph g(random_graph(200, 600, 3), make_tensor(200, 6, kernels::generate_features(200, 6, 1)));
  IncrementalGnn gnn(model, g);
  GraphUpdate bulk;
  kernels::EdgeList more = random_graph(200, 400, 9);
  bulk.add_src = more.src;
  bulk.add_dst = more.dst;
  const IncrementalStats s = gnn.update(g, g.apply(bulk));
  EXPECT_EQ(s.rows.back(), 200);  // past the share where differences pay, the whole forward ran
  EXPECT_LT(relative_error(gnn.output(), whole_forward(*model, g)), 1e-5);
}

TEST(IncrementalGnn, RowsAnswerInTheOrderAsked) {
  const auto model = std::make_shared<const Model>(Model::sage({.layers = 1, .in_features = 4, .hidden = 3}));
  DynamicGraph g(random_graph(50, 200, 2), make_tensor(50, 4, kernels::generate_features(50, 4, 2)));
  IncrementalGnn gnn(model, g);
  const std::vector<std::int64_t> ids = {7, 0, 7, 49};
  const HostTensor y = gnn.rows(ids);
  ASSERT_EQ(y.rows, 4);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t c = 0; c < y.cols; ++c) EXPECT_EQ(y.data[i * 3 + c], gnn.output().data[ids[i] * 3 + c]);
  const std::vector<std::int64_t> bad = {1, 50};
  try {
    gnn.rows(bad);
    ADD_FAILURE() << "node 50 of 50";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "node_ids[1]");
  }
}

TEST(DynamicGraph, RefusesAnUpdateWholeAndNamesTheField) {
  kernels::EdgeList e;
  e.num_nodes = 4;
  e.src = {0, 1, 1};
  e.dst = {1, 2, 2};
  DynamicGraph g(e, make_tensor(4, 2, std::vector<float>(8, 1.0f)));
  auto refused = [&](const GraphUpdate& u, const std::string& where, const std::string& problem) {
    const std::int64_t edges = g.num_edges();
    try {
      g.apply(u);
      ADD_FAILURE() << "applied: " << where;
    } catch (const InputError& err) {
      EXPECT_EQ(err.where(), where);
      EXPECT_NE(err.problem().find(problem), std::string::npos) << err.what();
    }
    EXPECT_EQ(g.version(), 0u);
    EXPECT_EQ(g.num_edges(), edges);
  };
  GraphUpdate u;
  u.add_src = {0, 2};
  u.add_dst = {3, 4};
  refused(u, "add_edges[1][1]", "node 4 out of range [0, 4)");
  u = {};
  u.add_src = {0};
  u.add_dst = {3};
  u.remove_src = {1, 1, 1};  // 1 -> 2 is there twice, not three times
  u.remove_dst = {2, 2, 2};
  refused(u, "remove_edges[0]", "is not in the graph 3 times (it is there 2)");
  u = {};
  u.remove_src = {2};
  u.remove_dst = {1};  // edges are directed
  refused(u, "remove_edges[0]", "edge 2 -> 1 is not in the graph");
  u = {};
  u.set_rows = {3};
  u.set_x = {1.0f, 2.0f, 3.0f};
  refused(u, "x", "rows of the wrong width");
  u = {};
  u.add_nodes = 1;
  u.add_x = {1.0f};
  refused(u, "add_nodes", "new nodes need 1 rows of 2 features");
  u = {};
  u.set_rows = {2, 2};
  u.set_x = {0, 0, 0, 0};
  refused(u, "set_rows", "names node 2 twice");
  u = {};
  u.set_rows = {1};
  u.set_x = {0.0f, std::nanf("")};
  refused(u, "x[1]", "not a finite number");
  refused({}, "inputs", "an update needs");
  // A good update applies whole: two occurrences of 1 -> 2 become one, node 4 arrives.
  u = {};
  u.remove_src = {1};
  u.remove_dst = {2};
  u.add_nodes = 1;
  u.add_x = {5.0f, 6.0f};
  u.add_src = {4};
  u.add_dst = {0};
  const GraphChange c = g.apply(u);
  EXPECT_EQ(g.version(), 1u);
  EXPECT_EQ(g.nodes(), 5);
  EXPECT_EQ(g.num_edges(), 3);
  EXPECT_EQ(g.in_degree(2), 1);
  EXPECT_EQ(c.feature_rows, std::vector<std::int32_t>{4});
  EXPECT_EQ(g.features().data[9], 6.0f);
}

}  // namespace
}  // namespace dype::rt
