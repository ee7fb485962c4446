// SNAP edge-list reader: comments, tab/space separation, id remapping with the mapping kept,
// undirected mode, weights, and errors naming the file, line and problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "graph/snap_reader.h"

namespace dype::kernels {
namespace {

std::string data(const std::string& name) {
  return std::string(DYPE_SOURCE_DIR) + "/tests/data/graphs/" + name;
}

TEST(SnapReader, RemapsNonContiguousIdsInIncreasingOrder) {
  const SnapGraph g = read_snap(data("snap_small.txt"));
  EXPECT_EQ(g.edges.num_nodes, 4);
  EXPECT_EQ(g.original_ids, (std::vector<std::int64_t>{10, 20, 30, 100}));
  ASSERT_EQ(g.edges.num_edges(), 6);
  EXPECT_TRUE(g.edges.weight.empty());
  // 10->20, 20->30, 30->10, 30->30, 100->10, 20->100 (the last line has leading spaces).
  EXPECT_EQ(g.edges.src, (std::vector<std::int64_t>{0, 1, 2, 2, 3, 1}));
  EXPECT_EQ(g.edges.dst, (std::vector<std::int64_t>{1, 2, 0, 2, 0, 3}));
  for (std::int64_t e = 0; e < g.edges.num_edges(); ++e) {
    EXPECT_LT(g.edges.src[e], g.edges.num_nodes);
    EXPECT_LT(g.edges.dst[e], g.edges.num_nodes);
  }
}

TEST(SnapReader, ContiguousIdsMapToThemselves) {
  const SnapGraph g = parse_snap("0 1\n1 2\n2 0\n", "tri.txt");
  EXPECT_EQ(g.original_ids, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(g.edges.src, (std::vector<std::int64_t>{0, 1, 2}));
}

TEST(SnapReader, SparseHugeIdsUseSortedRemap) {
  const SnapGraph g = parse_snap("5000000000000\t7\n7\t42\n", "huge.txt");
  EXPECT_EQ(g.edges.num_nodes, 3);
  EXPECT_EQ(g.original_ids, (std::vector<std::int64_t>{7, 42, 5000000000000}));
  EXPECT_EQ(g.edges.src, (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ(g.edges.dst, (std::vector<std::int64_t>{0, 1}));
}

TEST(SnapReader, KeepIdsWhenRemapOff) {
  SnapOptions opt;
  opt.remap_ids = false;
  const SnapGraph g = read_snap(data("snap_small.txt"), opt);
  EXPECT_EQ(g.edges.num_nodes, 101);
  EXPECT_TRUE(g.original_ids.empty());
  EXPECT_EQ(g.edges.src[0], 10);
  EXPECT_EQ(g.edges.dst[0], 20);
}

TEST(SnapReader, UndirectedAddsReverseEdgesButNotForSelfLoops) {
  SnapOptions opt;
  opt.undirected = true;
  const SnapGraph g = read_snap(data("snap_small.txt"), opt);
  // 6 edges, one self-loop: 6 + 5 reversed.
  ASSERT_EQ(g.edges.num_edges(), 11);
  EXPECT_EQ(g.edges.src[6], 1);  // reverse of 0 -> 1
  EXPECT_EQ(g.edges.dst[6], 0);
}

TEST(SnapReader, WeightedThirdColumnAndPercentComments) {
  SnapOptions opt;
  opt.weighted = true;
  opt.undirected = true;
  const SnapGraph g = read_snap(data("snap_weighted.txt"), opt);
  ASSERT_EQ(g.edges.num_edges(), 6);
  ASSERT_EQ(g.edges.weight.size(), 6u);
  EXPECT_FLOAT_EQ(g.edges.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(g.edges.weight[3], 0.5f);  // reverse of the first edge
  EXPECT_FLOAT_EQ(g.edges.weight[5], 2.5f);
}

TEST(SnapReader, IgnoreExtraColumns) {
  SnapOptions opt;
  opt.ignore_extra_columns = true;
  const SnapGraph g = read_snap(data("snap_extra_column.txt"), opt);
  EXPECT_EQ(g.edges.num_edges(), 2);
}

TEST(SnapReader, EmptyInputIsAnEmptyGraph) {
  const SnapGraph g = parse_snap("# nothing here\n\n", "empty.txt");
  EXPECT_EQ(g.edges.num_nodes, 0);
  EXPECT_EQ(g.edges.num_edges(), 0);
}

void expect_error(const std::string& file, const SnapOptions& opt, const std::string& expected) {
  try {
    read_snap(data(file), opt);
    FAIL() << file << ": expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "got: " << e.what();
  }
}

TEST(SnapReader, MalformedFilesNameFileLineAndProblem) {
  expect_error("snap_bad_id.txt", {}, "snap_bad_id.txt:3: destination node id 'x' is not an");
  expect_error("snap_negative.txt", {}, "snap_negative.txt:3: destination node id -4 is negative");
  expect_error("snap_one_column.txt", {}, "snap_one_column.txt:2: expected 'source destination'");
  expect_error("snap_extra_column.txt", {},
               "snap_extra_column.txt:2: trailing garbage '1700000000' after the two node ids");
  SnapOptions weighted;
  weighted.weighted = true;
  expect_error("snap_small.txt", weighted, "snap_small.txt:4: missing the weight column");
  expect_error("does_not_exist.txt", {}, "does_not_exist.txt: cannot open");
}

TEST(SnapReader, NonFiniteWeightRejected) {
  SnapOptions opt;
  opt.weighted = true;
  EXPECT_THROW(parse_snap("1 2 inf\n", "w.txt", opt), InputError);
  try {
    parse_snap("1 2 1\n2 3 nan\n", "w.txt", opt);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "w.txt:2");
  }
}

}  // namespace
}  // namespace dype::kernels
