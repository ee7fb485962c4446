#pragma once
// Row partitioning of a CSR matrix for multi-device pipeline stages: a stage on c devices gives
// each device a contiguous slice of A's rows (balanced by nnz) and that device computes those
// rows of Y = A X from the full X.
//
//   std::vector<std::int64_t> b = partition_rows_by_nnz(a.view(), 3);  // 4 boundaries
//   CsrI32 part1 = slice_rows(a.view(), b[1], b[2]);                   // device 1's rows
//   cpu::spmm(part1.view(), x, n, std::span(y).subspan(b[1] * n, (b[2] - b[1]) * n));
#include <cstdint>
#include <vector>

#include "common/csr.h"

namespace dype::kernels {

// parts + 1 row boundaries 0 = b[0] <= b[1] <= ... <= b[parts] = rows; part p is rows
// [b[p], b[p+1]). Each part's cost nnz + row_cost * rows is as close to total / parts as whole
// rows allow (a row is never split: it is one device's output). row_cost > 0 also spreads runs of
// empty rows; with row_cost = 0 and no nnz the rows are split evenly. parts >= 1 (InputError).
template <typename Index>
std::vector<std::int64_t> partition_rows_by_nnz(const CsrView<Index>& a, int parts,
                                                double row_cost = 0.0);

// nnz of each part given the boundaries from partition_rows_by_nnz.
template <typename Index>
std::vector<std::int64_t> part_nnz(const CsrView<Index>& a, const std::vector<std::int64_t>& bounds);

// Rows [row_begin, row_end) of A as a matrix of their own: indptr rebased to 0, same columns
// (cols unchanged, so it still multiplies the full X). InputError when the range is invalid.
template <typename Index>
Csr<Index> slice_rows(const CsrView<Index>& a, std::int64_t row_begin, std::int64_t row_end);

}  // namespace dype::kernels
