#pragma once
// Compressed sparse row matrices, the graph representation of every SpMM in dype.
// Index is int32_t or int64_t; indptr has rows + 1 entries, indices/values have nnz entries.
#include <cstdint>
#include <span>
#include <vector>

namespace dype::kernels {

template <typename Index>
struct CsrView {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::span<const Index> indptr;   // rows + 1
  std::span<const Index> indices;  // nnz, column of each entry
  std::span<const float> values;   // nnz
  std::int64_t nnz() const { return static_cast<std::int64_t>(indices.size()); }
};

template <typename Index>
struct Csr {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<Index> indptr;
  std::vector<Index> indices;
  std::vector<float> values;

  std::int64_t nnz() const { return static_cast<std::int64_t>(indices.size()); }
  CsrView<Index> view() const { return {rows, cols, indptr, indices, values}; }
};

using CsrI32 = Csr<std::int32_t>;
using CsrI64 = Csr<std::int64_t>;

}  // namespace dype::kernels
