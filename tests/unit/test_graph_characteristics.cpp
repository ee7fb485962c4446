// Graph characteristics: exact values on hand-checked graphs, agreement between the edge-list,
// CSR and degree-sequence entry points, and the SpMM shape handed to the performance models.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "graph/characteristics.h"

namespace dype::kernels {
namespace {

// Reference Gini by the textbook O(n^2) mean absolute difference.
double gini_reference(const std::vector<std::int64_t>& x) {
  double diff = 0;
  double sum = 0;
  for (auto a : x) {
    sum += static_cast<double>(a);
    for (auto b : x) diff += std::fabs(static_cast<double>(a - b));
  }
  const auto n = static_cast<double>(x.size());
  return diff / (2 * n * sum);
}

TEST(GraphCharacteristics, StarGraph) {
  // Star: nodes 1..4 all point at node 0, plus a self-loop on 0. In-degrees: 5, 0, 0, 0, 0.
  EdgeList g;
  g.num_nodes = 5;
  g.src = {1, 2, 3, 4, 0};
  g.dst = {0, 0, 0, 0, 0};
  const GraphCharacteristics c = characterize(g);
  EXPECT_EQ(c.nodes, 5);
  EXPECT_EQ(c.nnz, 5);
  EXPECT_DOUBLE_EQ(c.density, 5.0 / 25.0);
  EXPECT_DOUBLE_EQ(c.mean_degree, 1.0);
  EXPECT_EQ(c.max_degree, 5);
  EXPECT_EQ(c.min_degree, 0);
  EXPECT_DOUBLE_EQ(c.degree_skew, 5.0);
  EXPECT_DOUBLE_EQ(c.degree_cv, 2.0);  // stddev sqrt(5 - 1) = 2, mean 1
  EXPECT_NEAR(c.degree_gini, 0.8, 1e-12);  // (n - 1) / n for one node holding everything
  EXPECT_EQ(c.isolated_nodes, 4);
  EXPECT_EQ(c.self_loops, 1);

  const GraphCharacteristics out = characterize(g, DegreeKind::out);
  EXPECT_EQ(out.max_degree, 1);
  EXPECT_DOUBLE_EQ(out.degree_skew, 1.0);
  EXPECT_DOUBLE_EQ(out.degree_gini, 0.0);
  EXPECT_DOUBLE_EQ(out.degree_cv, 0.0);
}

TEST(GraphCharacteristics, GiniMatchesReference) {
  const std::vector<std::int64_t> deg = {3, 0, 7, 7, 1, 12, 2, 0, 5, 3};
  const GraphCharacteristics c = characterize_degrees(deg);
  EXPECT_NEAR(c.degree_gini, gini_reference(deg), 1e-12);
  EXPECT_EQ(c.nnz, 40);
  EXPECT_DOUBLE_EQ(c.degree_skew, 12.0 / 4.0);
  EXPECT_EQ(c.isolated_nodes, 2);
}

TEST(GraphCharacteristics, CsrAgreesWithEdgeList) {
  // adj_t CSR: row r lists the sources of r's in-edges.
  CsrI32 m;
  m.rows = 4;
  m.cols = 4;
  m.indptr = {0, 2, 3, 3, 6};
  m.indices = {1, 2, 1, 0, 3, 1};
  m.values.assign(6, 1.0f);
  EdgeList g;
  g.num_nodes = 4;
  for (std::int64_t r = 0; r < 4; ++r) {
    for (auto k = m.indptr[r]; k < m.indptr[r + 1]; ++k) {
      g.src.push_back(m.indices[k]);
      g.dst.push_back(r);
    }
  }
  const GraphCharacteristics a = characterize(m.view());
  const GraphCharacteristics b = characterize(g);
  EXPECT_EQ(a.nnz, b.nnz);
  EXPECT_EQ(a.max_degree, b.max_degree);
  EXPECT_DOUBLE_EQ(a.degree_gini, b.degree_gini);
  EXPECT_DOUBLE_EQ(a.degree_cv, b.degree_cv);
  EXPECT_EQ(a.self_loops, 2);  // (1, 1) and (3, 3)
  EXPECT_EQ(b.self_loops, 2);
  CsrI64 m64;
  m64.rows = 4;
  m64.cols = 4;
  m64.indptr = {0, 2, 3, 3, 6};
  m64.indices = {1, 2, 1, 0, 3, 1};
  EXPECT_DOUBLE_EQ(characterize(m64.view()).degree_skew, a.degree_skew);
}

TEST(GraphCharacteristics, EmptyGraphs) {
  const GraphCharacteristics none = characterize(EdgeList{});
  EXPECT_EQ(none.nodes, 0);
  EXPECT_EQ(none.nnz, 0);
  EdgeList lonely;
  lonely.num_nodes = 3;
  const GraphCharacteristics c = characterize(lonely);
  EXPECT_EQ(c.isolated_nodes, 3);
  EXPECT_DOUBLE_EQ(c.degree_skew, 0.0);
  EXPECT_DOUBLE_EQ(c.degree_gini, 0.0);
}

TEST(GraphCharacteristics, RejectsInconsistentInput) {
  EdgeList g;
  g.num_nodes = 2;
  g.src = {0, 1};
  g.dst = {1, 2};
  EXPECT_THROW(characterize(g), InputError);
  g.dst = {1};
  EXPECT_THROW(characterize(g), InputError);
}

TEST(GraphCharacteristics, SpmmShapeForPerfModels) {
  const std::vector<std::int64_t> deg = {1, 1, 4, 2};
  const OpShape s = spmm_shape(characterize_degrees(deg), 128);
  EXPECT_EQ(s.kind, OpKind::spmm);
  EXPECT_EQ(s.m, 4);
  EXPECT_EQ(s.k, 4);
  EXPECT_EQ(s.n, 128);
  EXPECT_EQ(s.nnz, 8);
  EXPECT_DOUBLE_EQ(s.degree_skew, 2.0);
  EXPECT_DOUBLE_EQ(s.density(), 0.5);
}

}  // namespace
}  // namespace dype::kernels
