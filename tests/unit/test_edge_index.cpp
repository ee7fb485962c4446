// PyG edge_index / CSR input validation: conversions are exact, and each bad tensor raises an
// InputError naming the field and position.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "graph/edge_index.h"

namespace dype::kernels {
namespace {

using I64 = std::vector<std::int64_t>;

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(EdgeIndex, ConvertsRowMajorTwoByE) {
  const I64 ei = {0, 1, 2, 3, /**/ 1, 2, 3, 0};
  const I64 shape = {2, 4};
  const std::vector<float> w = {0.5f, 1, 2, 3};
  const EdgeList g = edge_index_to_edge_list(ei, shape, 4, std::span<const float>(w));
  EXPECT_EQ(g.num_nodes, 4);
  EXPECT_EQ(g.src, (I64{0, 1, 2, 3}));
  EXPECT_EQ(g.dst, (I64{1, 2, 3, 0}));
  EXPECT_EQ(g.weight, w);
}

TEST(EdgeIndex, InfersNodeCountAndAcceptsEmpty) {
  const I64 ei = {0, 5, 2, 1};
  EXPECT_EQ(edge_index_to_edge_list(ei, I64{2, 2}, std::nullopt).num_nodes, 6);
  const EdgeList empty = edge_index_to_edge_list({}, I64{2, 0}, 3);
  EXPECT_EQ(empty.num_nodes, 3);
  EXPECT_EQ(empty.num_edges(), 0);
  // Present but empty weights for zero edges are fine.
  EXPECT_NO_THROW(edge_index_to_edge_list({}, I64{2, 0}, 3, std::span<const float>()));
}

TEST(EdgeIndex, OutOfRangeNamesRowAndColumn) {
  I64 ei(2 * 20, 0);
  ei[20 + 17] = 1000;
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{2, 20}, 1000); }),
            "edge_index[1][17]: node 1000 out of range [0, 1000)");
}

TEST(EdgeIndex, NegativeIdNamed) {
  const I64 ei = {0, -3, 1, 1};
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{2, 2}, 4); }),
            "edge_index[0][1]: negative node id -3");
  // Also when the node count is inferred.
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{2, 2}, std::nullopt); }),
            "edge_index[0][1]: negative node id -3");
}

TEST(EdgeIndex, WrongShapes) {
  const I64 ei = {0, 1, 2, 0, 1, 2};
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{3, 2}, 3); }),
            "edge_index: shape [3, 2] must be [2, E]");
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{6}, 3); }),
            "edge_index: shape [6] must be [2, E]");
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{2, 4}, 3); }),
            "edge_index: 6 values for shape [2, 4] (expected 2 * 4)");
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{2, -3}, 3); }),
            "edge_index: shape [2, -3] must be [2, E]");
  const I64 huge = {2, std::numeric_limits<std::int64_t>::max()};
  EXPECT_NE(error_of([&] { edge_index_to_edge_list(ei, huge, 3); }).find("values for shape"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, I64{2, 3}, -1); }),
            "num_nodes: -1 is negative");
}

TEST(EdgeIndex, BadWeights) {
  const I64 ei = {0, 1, 2, 1, 2, 0};
  const I64 shape = {2, 3};
  const std::vector<float> short_w = {1, 2};
  EXPECT_EQ(error_of([&] {
              edge_index_to_edge_list(ei, shape, 3, std::span<const float>(short_w));
            }),
            "edge_weight: 2 values for 3 edges");
  std::vector<float> w = {1, std::nanf(""), 2};
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, shape, 3, std::span<const float>(w)); }),
            "edge_weight[1]: NaN");
  w = {1, 2, -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(error_of([&] { edge_index_to_edge_list(ei, shape, 3, std::span<const float>(w)); }),
            "edge_weight[2]: infinite value");
}

TEST(CsrInput, ConvertsToCsrAndEdgeList) {
  // 3 nodes: row 0 gathers from {1, 2}, row 1 from nothing, row 2 from {0}.
  const I64 indptr = {0, 2, 2, 3};
  const I64 indices = {1, 2, 0};
  const CsrI64 m = csr_input_to_csr(indptr, indices, 3);
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.indptr, indptr);
  EXPECT_EQ(m.values, (std::vector<float>{1, 1, 1}));
  const std::vector<float> vals = {0.5f, 0.25f, 2.0f};
  const EdgeList g = csr_input_to_edge_list(indptr, indices, 3, std::span<const float>(vals));
  // Entry (r, c) is the edge c -> r.
  EXPECT_EQ(g.src, (I64{1, 2, 0}));
  EXPECT_EQ(g.dst, (I64{0, 0, 2}));
  EXPECT_EQ(g.weight, vals);
}

TEST(CsrInput, Errors) {
  const I64 indices = {1, 2, 0};
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{0, 2, 3}, indices, 3); }),
            "indptr: 3 entries for 3 nodes (expected 4)");
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{1, 2, 2, 3}, indices, 3); }),
            "indptr[0]: must be 0, got 1");
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{0, 2, 1, 3}, indices, 3); }),
            "indptr[2]: 1 < indptr[1] = 2 (indptr must not decrease)");
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{0, 2, 2, 4}, indices, 3); }),
            "indptr[3]: last entry 4 != number of indices 3");
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{0, 2, 2, 3}, I64{1, 3, 0}, 3); }),
            "indices[1]: node 3 out of range [0, 3)");
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{0, 2, 2, 3}, I64{1, 2, -1}, 3); }),
            "indices[2]: negative node id -1");
  const std::vector<float> bad = {1, 2, std::nanf("")};
  EXPECT_EQ(error_of([&] {
              validate_csr_input(I64{0, 2, 2, 3}, indices, 3, std::span<const float>(bad));
            }),
            "values[2]: NaN");
  EXPECT_EQ(error_of([&] { validate_csr_input(I64{0}, {}, -2); }), "num_nodes: -2 is negative");
  EXPECT_NO_THROW(validate_csr_input(I64{0}, {}, 0));
}

}  // namespace
}  // namespace dype::kernels
