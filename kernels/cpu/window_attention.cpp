#include "kernels/cpu/window_attention.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/window_attention_internal.h"
#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

constexpr std::int64_t kMaxBlockRows = 256;

using BlockFn = void (*)(const detail::AttentionBlock&);

BlockFn block_fn(Isa isa) {
  switch (isa) {
    case Isa::avx512: return detail::attention_block_avx512;
    case Isa::avx2: return detail::attention_block_avx2;
    case Isa::scalar: break;
  }
  return detail::attention_block_scalar;
}

std::int64_t half_window(const WindowAttentionDims& dims) {
  // Beyond seq_len every key is in the band already; capping keeps i + half from overflowing.
  return std::min(dims.window / 2, dims.seq_len);
}

// Rows per task: large enough that packing K^T for the band (block + window keys) is a small
// fraction of the block's work, small enough that there are a few tasks per thread to balance.
std::int64_t block_rows_for(const WindowAttentionDims& dims, std::int64_t threads) {
  const std::int64_t want_tasks = 4 * threads;
  const std::int64_t blocks_per_head = std::max<std::int64_t>(1, (want_tasks + dims.heads - 1) / dims.heads);
  std::int64_t rows = (dims.seq_len + blocks_per_head - 1) / blocks_per_head;
  rows = std::clamp<std::int64_t>(rows, 1, kMaxBlockRows);
  if (rows > 8) rows = (rows + 7) / 8 * 8;  // whole micro-tiles
  return rows;
}

void check_span(const char* name, std::size_t have, std::int64_t need) {
  if (static_cast<std::int64_t>(have) < need) {
    throw InputError(std::string("window_attention: ") + name,
                     "has " + std::to_string(have) + " floats, the shape needs " +
                         std::to_string(need) + " (seq_len x heads x head_dim)");
  }
}

}  // namespace

std::int64_t window_attention_scratch_bytes(const WindowAttentionDims& dims) {
  if (dims.seq_len <= 0 || dims.heads <= 0 || dims.head_dim <= 0) return 0;
  const std::int64_t threads = tbb::this_task_arena::max_concurrency();
  const std::int64_t rows = block_rows_for(dims, threads);
  return static_cast<std::int64_t>(sizeof(float)) *
         detail::attention_scratch_floats(rows, half_window(dims), dims.seq_len, dims.head_dim);
}

void window_attention(std::span<const float> q, std::span<const float> k,
                      std::span<const float> v, std::span<float> out,
                      const WindowAttentionDims& dims) {
  if (dims.seq_len < 0) throw InputError("window_attention: seq_len", "must be >= 0, got " + std::to_string(dims.seq_len));
  if (dims.heads < 1) throw InputError("window_attention: heads", "must be >= 1, got " + std::to_string(dims.heads));
  if (dims.head_dim < 1) throw InputError("window_attention: head_dim", "must be >= 1, got " + std::to_string(dims.head_dim));
  if (dims.window < 0) throw InputError("window_attention: window", "must be >= 0, got " + std::to_string(dims.window));
  const std::int64_t ld = dims.heads * dims.head_dim;
  const std::int64_t need = dims.seq_len * ld;
  check_span("q", q.size(), need);
  check_span("k", k.size(), need);
  check_span("v", v.size(), need);
  check_span("out", out.size(), need);
  if (dims.seq_len == 0) return;

  const std::int64_t threads = tbb::this_task_arena::max_concurrency();
  const std::int64_t rows = block_rows_for(dims, threads);
  const std::int64_t blocks_per_head = (dims.seq_len + rows - 1) / rows;
  const std::int64_t half = half_window(dims);
  const std::size_t scratch_floats = static_cast<std::size_t>(
      detail::attention_scratch_floats(rows, half, dims.seq_len, dims.head_dim));
  const BlockFn fn = block_fn(active_isa());

  detail::AttentionBlock base;
  base.q = q.data();
  base.k = k.data();
  base.v = v.data();
  base.out = out.data();
  base.seq_len = dims.seq_len;
  base.ld = ld;
  base.head_dim = dims.head_dim;
  base.half = half;
  base.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.head_dim)));

  tbb::parallel_for(
      tbb::blocked_range<std::int64_t>(0, dims.heads * blocks_per_head, 1),
      [&](const tbb::blocked_range<std::int64_t>& range) {
        // Per-thread scratch kept across calls: O(window * head_dim), reused, never seq_len^2.
        thread_local std::vector<float> scratch;
        if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
        for (std::int64_t t = range.begin(); t != range.end(); ++t) {
          detail::AttentionBlock b = base;
          const std::int64_t head = t / blocks_per_head;
          const std::int64_t blk = t % blocks_per_head;
          b.col0 = head * dims.head_dim;
          b.row_begin = blk * rows;
          b.row_end = std::min(dims.seq_len, b.row_begin + rows);
          b.scratch = scratch.data();
          fn(b);
        }
      });
}

}  // namespace dype::kernels::cpu
