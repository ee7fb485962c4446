#pragma once
// Which rows of a kernel's input a device must hold to compute its share of the output rows: the
// one rule the pipeline moves data by (pipeline.cpp, what each device needs before kernel k) and
// the planner costs (planner.cpp, the bytes and shard shapes of a c-device stage).
//
//   rt::RowRange need = rt::rows_needed(OpKind::window_attention, {.lo = 100, .hi = 200}, 1000, 64);
//   // need = [68, 232): its own rows plus a halo of window / 2 on each side
#include <algorithm>
#include <cstdint>

#include "common/op.h"

namespace dype::rt {

// Rows [lo, hi) of a tensor.
struct RowRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  std::int64_t count() const { return hi - lo; }
};

// A row-local kernel computes output row r from input row r only (GEMM, norms, softmax...).
inline bool row_local(kernels::OpKind op) {
  return op != kernels::OpKind::spmm && op != kernels::OpKind::window_attention;
}

// The input rows a device computing output rows `own` of `rows` needs: an SpMM every row (A's
// columns span the whole graph), a window attention its rows plus a halo of window / 2 on each side
// (clipped to the sequence), a row-local kernel its own rows.
inline RowRange rows_needed(kernels::OpKind op, RowRange own, std::int64_t rows, std::int64_t window) {
  if (op == kernels::OpKind::spmm) return {0, rows};
  if (op == kernels::OpKind::window_attention) {
    const std::int64_t halo = window / 2;
    return {std::max<std::int64_t>(0, own.lo - halo), std::min<std::int64_t>(rows, own.hi + halo)};
  }
  return own;
}

}  // namespace dype::rt
