#include "graph/partition.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace dype::kernels {

template <typename Index>
std::vector<std::int64_t> partition_rows_by_nnz(const CsrView<Index>& a, int parts,
                                                double row_cost) {
  if (parts < 1) throw InputError("partition: parts", std::to_string(parts) + " < 1");
  if (!(row_cost >= 0.0) || !std::isfinite(row_cost)) {
    throw InputError("partition: row_cost", std::to_string(row_cost) + " is not a finite value >= 0");
  }
  if (static_cast<std::int64_t>(a.indptr.size()) != a.rows + 1) {
    throw InputError("partition: A.indptr", std::to_string(a.indptr.size()) +
                                                " entries, expected rows + 1 = " +
                                                std::to_string(a.rows + 1));
  }
  const std::int64_t rows = a.rows;
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(parts) + 1, rows);
  bounds[0] = 0;
  const double nnz = static_cast<double>(a.indptr[rows]);
  if (nnz == 0.0 && row_cost == 0.0) row_cost = 1.0;  // nothing to balance but rows
  auto prefix = [&](std::int64_t r) { return static_cast<double>(a.indptr[r]) + row_cost * r; };
  const double total = prefix(rows);
  for (int p = 1; p < parts; ++p) {
    const double target = total * p / parts;
    // First row boundary whose prefix cost reaches the target, then the nearer of it and the one
    // before (a heavy row goes to whichever side leaves the smaller error).
    std::int64_t lo = bounds[p - 1], hi = rows;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (prefix(mid) < target) lo = mid + 1;
      else hi = mid;
    }
    if (lo > bounds[p - 1] && target - prefix(lo - 1) < prefix(lo) - target) --lo;
    bounds[p] = lo;
  }
  return bounds;
}

template <typename Index>
std::vector<std::int64_t> part_nnz(const CsrView<Index>& a, const std::vector<std::int64_t>& bounds) {
  std::vector<std::int64_t> out;
  for (std::size_t p = 0; p + 1 < bounds.size(); ++p) {
    out.push_back(static_cast<std::int64_t>(a.indptr[bounds[p + 1]]) - a.indptr[bounds[p]]);
  }
  return out;
}

template <typename Index>
Csr<Index> slice_rows(const CsrView<Index>& a, std::int64_t row_begin, std::int64_t row_end) {
  if (row_begin < 0 || row_begin > row_end || row_end > a.rows) {
    throw InputError("slice_rows", "row range [" + std::to_string(row_begin) + ", " +
                                       std::to_string(row_end) + ") not within [0, " +
                                       std::to_string(a.rows) + "]");
  }
  Csr<Index> s;
  s.rows = row_end - row_begin;
  s.cols = a.cols;
  const Index base = a.indptr[row_begin];
  const Index last = a.indptr[row_end];
  s.indptr.resize(static_cast<std::size_t>(s.rows + 1));
  for (std::int64_t r = 0; r <= s.rows; ++r) s.indptr[r] = a.indptr[row_begin + r] - base;
  s.indices.assign(a.indices.begin() + base, a.indices.begin() + last);
  s.values.assign(a.values.begin() + base, a.values.begin() + last);
  return s;
}

template std::vector<std::int64_t> partition_rows_by_nnz<std::int32_t>(const CsrView<std::int32_t>&, int, double);
template std::vector<std::int64_t> partition_rows_by_nnz<std::int64_t>(const CsrView<std::int64_t>&, int, double);
template std::vector<std::int64_t> part_nnz<std::int32_t>(const CsrView<std::int32_t>&, const std::vector<std::int64_t>&);
template std::vector<std::int64_t> part_nnz<std::int64_t>(const CsrView<std::int64_t>&, const std::vector<std::int64_t>&);
template Csr<std::int32_t> slice_rows<std::int32_t>(const CsrView<std::int32_t>&, std::int64_t, std::int64_t);
template Csr<std::int64_t> slice_rows<std::int64_t>(const CsrView<std::int64_t>&, std::int64_t, std::int64_t);

}  // namespace dype::kernels
