// Graph -> CSR builders (graph/builders.h): policies on small hand-made graphs, GCN/GIN
// matrices against dense references that follow PyG's definitions, both index widths, validation.
#include "graph/builders.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/spmm.h"
#include "common/error.h"
#include "graph/generators.h"

namespace dype::kernels {
namespace {

using Dense = std::vector<std::vector<double>>;

template <typename Index>
Dense densify(const Csr<Index>& a) {
  Dense d(a.rows, std::vector<double>(a.cols, 0.0));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (Index j = a.indptr[r]; j < a.indptr[r + 1]; ++j) {
      EXPECT_EQ(d[r][a.indices[j]], 0.0) << "duplicate column " << a.indices[j] << " in row " << r;
      d[r][a.indices[j]] = a.values[j];
    }
  }
  return d;
}

template <typename Index>
void expect_sorted_rows(const Csr<Index>& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (Index j = a.indptr[r] + 1; j < a.indptr[r + 1]; ++j) {
      ASSERT_LT(a.indices[j - 1], a.indices[j]) << "row " << r;
    }
  }
}

void expect_dense_near(const Dense& got, const Dense& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t r = 0; r < got.size(); ++r) {
    for (std::size_t c = 0; c < got[r].size(); ++c) {
      ASSERT_NEAR(got[r][c], want[r][c], tol) << "entry (" << r << ", " << c << ")";
    }
  }
}

// 0->1 twice (weights 2, 5), 2->1 (weight 1), 1->1 (loop, weight 4), node 3 isolated.
EdgeList small_graph() {
  EdgeList g;
  g.num_nodes = 4;
  g.src = {0, 2, 0, 1};
  g.dst = {1, 1, 1, 1};
  g.weight = {2.0f, 1.0f, 5.0f, 4.0f};
  return g;
}

TEST(GraphBuilders, OrientationAndDuplicatePolicies) {
  const EdgeList g = small_graph();
  const auto sum = to_csr<std::int32_t>(g);
  EXPECT_EQ(sum.indptr, (std::vector<std::int32_t>{0, 0, 3, 3, 3}));  // all in-edges of node 1
  EXPECT_EQ(sum.indices, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(sum.values, (std::vector<float>{7.0f, 4.0f, 1.0f}));
  EXPECT_EQ(to_csr<std::int64_t>(g, {.duplicates = DuplicateEdges::keep_first}).values,
            (std::vector<float>{2.0f, 4.0f, 1.0f}));
  EXPECT_EQ(to_csr<std::int64_t>(g, {.duplicates = DuplicateEdges::max}).values,
            (std::vector<float>{5.0f, 4.0f, 1.0f}));
}

TEST(GraphBuilders, SelfLoopPolicies) {
  const EdgeList g = small_graph();
  const Dense removed = densify(to_csr<std::int32_t>(g, {.self_loops = SelfLoops::remove}));
  EXPECT_EQ(removed[1][1], 0.0);
  EXPECT_EQ(removed[1][0], 7.0);
  const Dense missing = densify(
      to_csr<std::int32_t>(g, {.self_loops = SelfLoops::add_missing, .self_loop_weight = 3.0f}));
  EXPECT_EQ(missing[0][0], 3.0);
  EXPECT_EQ(missing[1][1], 4.0);  // the existing loop keeps its weight
  EXPECT_EQ(missing[3][3], 3.0);  // isolated node gets one
  const Dense added =
      densify(to_csr<std::int32_t>(g, {.self_loops = SelfLoops::add, .self_loop_weight = 3.0f}));
  EXPECT_EQ(added[1][1], 7.0);  // 4 + 3 under sum
  EXPECT_EQ(added[2][2], 3.0);
}

TEST(GraphBuilders, Symmetrize) {
  EdgeList g;
  g.num_nodes = 3;
  g.src = {0, 1, 2};
  g.dst = {1, 0, 2};
  const Dense sum = densify(to_csr<std::int32_t>(g, {.symmetrize = true}));
  EXPECT_EQ(sum[0][1], 2.0);  // present both ways: counted twice under sum
  EXPECT_EQ(sum[2][2], 1.0);  // a loop is not doubled
  const Dense simple = densify(
      to_csr<std::int32_t>(g, {.duplicates = DuplicateEdges::max, .symmetrize = true}));
  EXPECT_EQ(simple[0][1], 1.0);
  EXPECT_EQ(simple[1][0], 1.0);
}

EdgeList random_multigraph(std::int64_t nodes, std::int64_t edges, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> node(0, nodes - 1);
  std::uniform_real_distribution<float> w(0.1f, 2.0f);
  EdgeList g;
  g.num_nodes = nodes;
  for (std::int64_t e = 0; e < edges; ++e) {
    g.src.push_back(node(rng));
    g.dst.push_back(e % 7 == 0 ? g.src.back() : node(rng));  // some existing self loops
    g.weight.push_back(w(rng));
  }
  return g;
}

// PyG gcn_norm, step by step, on a dense matrix.
Dense reference_gcn(const EdgeList& g, bool symmetric, double fill) {
  const std::int64_t n = g.num_nodes;
  Dense a(n, std::vector<double>(n, 0.0));
  std::vector<bool> has_loop(n, false);
  for (std::int64_t e = 0; e < g.num_edges(); ++e) {
    a[g.dst[e]][g.src[e]] += g.weight.empty() ? 1.0 : g.weight[e];
    if (g.src[e] == g.dst[e]) has_loop[g.src[e]] = true;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (!has_loop[i]) a[i][i] += fill;
  }
  std::vector<double> deg(n, 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (double v : a[i]) deg[i] += v;
  }
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < n; ++c) {
      if (deg[r] == 0.0) {
        a[r][c] = 0.0;
      } else if (symmetric) {
        a[r][c] *= (deg[c] > 0 ? 1.0 / std::sqrt(deg[c]) : 0.0) / std::sqrt(deg[r]);
      } else {
        a[r][c] /= deg[r];
      }
    }
  }
  return a;
}

TEST(GraphBuilders, GcnNormMatchesPygDefinition) {
  const EdgeList g = random_multigraph(60, 400, 1);
  const auto a32 = gcn_norm<std::int32_t>(g);
  const auto a64 = gcn_norm<std::int64_t>(g);
  expect_sorted_rows(a32);
  expect_dense_near(densify(a32), reference_gcn(g, true, 1.0));
  expect_dense_near(densify(a64), densify(a32), 0.0);
  const auto rw = gcn_norm<std::int32_t>(g, {.normalization = GcnNormalization::random_walk});
  const Dense rwd = densify(rw);
  expect_dense_near(rwd, reference_gcn(g, false, 1.0));
  for (const auto& row : rwd) {  // every node has a loop: each row averages
    double s = 0.0;
    for (double v : row) s += v;
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
}

TEST(GraphBuilders, GcnNormWithoutSelfLoopsLeavesIsolatedNodesZero) {
  EdgeList g;
  g.num_nodes = 3;
  g.src = {0};
  g.dst = {1};
  const auto a = gcn_norm<std::int32_t>(g, {.add_self_loops = false});
  const Dense d = densify(a);
  for (const auto& row : d) {
    for (double v : row) EXPECT_TRUE(std::isfinite(v));
  }
  // deg(1) = 1 (in-edge), deg(0) = 0: PyG gives 0 (inf masked to 0).
  EXPECT_EQ(d[1][0], 0.0);
}

TEST(GraphBuilders, GinIsAPlusOnePlusEpsIdentity) {
  const EdgeList g = random_multigraph(40, 200, 2);
  const float eps = 0.25f;
  Dense want(40, std::vector<double>(40, 0.0));
  for (std::int64_t e = 0; e < g.num_edges(); ++e) want[g.dst[e]][g.src[e]] += g.weight[e];
  for (int i = 0; i < 40; ++i) want[i][i] += 1.0 + eps;
  expect_dense_near(densify(gin_adjacency<std::int32_t>(g, eps)), want, 1e-5);
  expect_dense_near(densify(gin_adjacency<std::int64_t>(g, eps)), want, 1e-5);
}

TEST(GraphBuilders, SpmmOverBuiltRmatGraphAggregatesInNeighbours) {
  const EdgeList g = generate_rmat(2000, 30000, 3);
  const auto a = to_csr<std::int32_t>(g);
  expect_sorted_rows(a);
  const std::int64_t n = 5;
  std::vector<float> x(g.num_nodes * n), y(g.num_nodes * n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  cpu::spmm(a.view(), x, n, y);
  std::vector<double> want(g.num_nodes * n, 0.0);  // message passing, edge by edge
  for (std::int64_t e = 0; e < g.num_edges(); ++e) {
    const float w = g.weight.empty() ? 1.0f : g.weight[e];
    for (std::int64_t c = 0; c < n; ++c) want[g.dst[e] * n + c] += w * x[g.src[e] * n + c];
  }
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-3) << i;
}

TEST(GraphBuilders, DegenerateGraphs) {
  EdgeList empty;
  const auto a = to_csr<std::int32_t>(empty);
  EXPECT_EQ(a.rows, 0);
  EXPECT_EQ(a.indptr, std::vector<std::int32_t>{0});
  EdgeList one;
  one.num_nodes = 1;
  EXPECT_EQ(gcn_norm<std::int64_t>(one).values, std::vector<float>{1.0f});  // loop, deg 1
  EXPECT_EQ(to_csr<std::int64_t>(one).nnz(), 0);
}

std::string error_of(const EdgeList& g) {
  try {
    to_csr<std::int32_t>(g);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GraphBuilders, ValidationNamesTheField) {
  EdgeList g;
  g.num_nodes = 1000;
  g.src.assign(20, 3);
  g.dst.assign(20, 4);
  g.dst[17] = 1000;
  EXPECT_EQ(error_of(g), "edge_index[1][17]: node 1000 out of range [0, 1000)");
  g.dst[17] = 4;
  g.src[2] = -1;
  EXPECT_EQ(error_of(g), "edge_index[0][2]: node -1 out of range [0, 1000)");
  g.src[2] = 0;
  g.weight.assign(19, 1.0f);
  EXPECT_EQ(error_of(g), "edge_weight: 19 entries for 20 edges");
  g.weight.assign(20, 1.0f);
  g.weight[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(error_of(g).find("edge_weight[5]: not finite"), std::string::npos);
  g.weight.clear();
  g.dst.pop_back();
  EXPECT_NE(error_of(g).find("edge_index: row 0 (sources) has 20"), std::string::npos);
  EdgeList negative;
  negative.num_nodes = -2;
  EXPECT_NE(error_of(negative).find("num_nodes"), std::string::npos);
  EdgeList huge;  // fits int64 indices but not int32
  huge.num_nodes = std::int64_t{3} << 30;
  EXPECT_NE(error_of(huge).find("int64"), std::string::npos);
}

}  // namespace
}  // namespace dype::kernels
