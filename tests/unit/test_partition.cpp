// Row partitioning balanced by nnz and row slicing (graph/partition.h), including the
// multi-device use: SpMM on each slice reproduces the rows of the full product.
#include "graph/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/spmm.h"
#include "common/error.h"
#include "graph/builders.h"
#include "graph/generators.h"

namespace dype::kernels {
namespace {

CsrI32 csr_from_degrees(const std::vector<std::int32_t>& degrees) {
  CsrI32 a;
  a.rows = static_cast<std::int64_t>(degrees.size());
  a.cols = 8;
  a.indptr.push_back(0);
  for (std::int32_t d : degrees) {
    for (std::int32_t k = 0; k < d; ++k) {
      a.indices.push_back(k % 8);
      a.values.push_back(1.0f);
    }
    a.indptr.push_back(static_cast<std::int32_t>(a.indices.size()));
  }
  return a;
}

template <typename Index>
void expect_valid_and_balanced(const Csr<Index>& a, int parts) {
  const auto b = partition_rows_by_nnz(a.view(), parts);
  ASSERT_EQ(b.size(), static_cast<std::size_t>(parts) + 1);
  EXPECT_EQ(b.front(), 0);
  EXPECT_EQ(b.back(), a.rows);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  std::int64_t max_row = 0;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    max_row = std::max<std::int64_t>(max_row, a.indptr[r + 1] - a.indptr[r]);
  }
  const auto nnz = part_nnz(a.view(), b);
  EXPECT_EQ(std::accumulate(nnz.begin(), nnz.end(), std::int64_t{0}), a.nnz());
  // Whole rows only: a part can miss the ideal share by at most one row.
  const double ideal = static_cast<double>(a.nnz()) / parts;
  for (std::int64_t p : nnz) EXPECT_LE(std::abs(p - ideal), max_row + 1.0) << "parts=" << parts;
}

TEST(Partition, BalancedOnPowerLawGraph) {
  const auto a = to_csr<std::int32_t>(generate_rmat(5000, 80000, 1));
  for (int parts : {1, 2, 3, 5, 8}) expect_valid_and_balanced(a, parts);
  const auto a64 = to_csr<std::int64_t>(generate_rmat(5000, 80000, 1));
  expect_valid_and_balanced(a64, 3);
  EXPECT_EQ(partition_rows_by_nnz(a.view(), 3), partition_rows_by_nnz(a64.view(), 3));
}

TEST(Partition, HeavyRowGetsItsOwnPart) {
  // 1000 nnz in row 5 of 10 rows of 10: the heavy row must not drag neighbours along.
  std::vector<std::int32_t> deg(10, 10);
  deg[5] = 1000;
  const auto a = csr_from_degrees(deg);
  const auto b = partition_rows_by_nnz(a.view(), 3);
  const auto nnz = part_nnz(a.view(), b);
  EXPECT_EQ(*std::max_element(nnz.begin(), nnz.end()), 1000);
  expect_valid_and_balanced(a, 3);
}

TEST(Partition, DegenerateInputs) {
  const auto none = csr_from_degrees(std::vector<std::int32_t>(12, 0));  // no nnz: split rows
  EXPECT_EQ(partition_rows_by_nnz(none.view(), 4), (std::vector<std::int64_t>{0, 3, 6, 9, 12}));
  const auto two = csr_from_degrees({3, 3});  // more parts than rows: some parts empty
  const auto b = partition_rows_by_nnz(two.view(), 5);
  EXPECT_EQ(b.front(), 0);
  EXPECT_EQ(b.back(), 2);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  const auto empty = csr_from_degrees({});
  EXPECT_EQ(partition_rows_by_nnz(empty.view(), 2), (std::vector<std::int64_t>{0, 0, 0}));
  EXPECT_THROW(partition_rows_by_nnz(two.view(), 0), InputError);
  EXPECT_THROW(partition_rows_by_nnz(two.view(), 2, -1.0), InputError);
}

TEST(Partition, RowCostSpreadsEmptyRows) {
  std::vector<std::int32_t> deg(100, 0);
  deg[0] = 50;
  const auto a = csr_from_degrees(deg);
  EXPECT_EQ(partition_rows_by_nnz(a.view(), 2, 0.0)[1], 1);   // by nnz only
  // Cost 50 + 100 rows: half is 75, reached after row 0 and 25 more rows.
  EXPECT_EQ(partition_rows_by_nnz(a.view(), 2, 1.0)[1], 25);
}

TEST(Partition, SlicesComputeTheirRowsOfTheProduct) {
  const auto a = gcn_norm<std::int64_t>(generate_rmat(3000, 40000, 2));
  const std::int64_t n = 24;
  std::vector<float> x(a.cols * n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : x) v = u(rng);
  std::vector<float> full(a.rows * n), pieces(a.rows * n, -7.0f);
  cpu::spmm(a.view(), x, n, full);
  const auto b = partition_rows_by_nnz(a.view(), 3);
  for (int p = 0; p < 3; ++p) {
    const auto s = slice_rows(a.view(), b[p], b[p + 1]);
    EXPECT_EQ(s.rows, b[p + 1] - b[p]);
    EXPECT_EQ(s.cols, a.cols);
    EXPECT_EQ(s.indptr.front(), 0);
    cpu::spmm(s.view(), x, n, std::span(pieces).subspan(b[p] * n, s.rows * n));
  }
  EXPECT_EQ(pieces, full);  // same rows, same order of summation: bit-identical
}

TEST(Partition, SliceRangeIsValidated) {
  const auto a = csr_from_degrees({1, 2, 3});
  EXPECT_EQ(slice_rows(a.view(), 1, 1).nnz(), 0);
  EXPECT_EQ(slice_rows(a.view(), 1, 3).indptr, (std::vector<std::int32_t>{0, 2, 5}));
  EXPECT_THROW(slice_rows(a.view(), 2, 1), InputError);
  EXPECT_THROW(slice_rows(a.view(), 0, 4), InputError);
  EXPECT_THROW(slice_rows(a.view(), -1, 2), InputError);
}

}  // namespace
}  // namespace dype::kernels
