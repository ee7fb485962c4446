#include "kernels/cpu/spmm.h"

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/spmm_kernels.h"
#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

using detail::SpmmOperands;
using detail::SpmmRowsFn;

template <typename Index>
SpmmRowsFn<Index> pick_kernel(Isa isa) {
  switch (isa) {
    case Isa::avx512: return &detail::spmm_rows_avx512<Index>;
    case Isa::avx2: return &detail::spmm_rows_avx2<Index>;
    case Isa::scalar: break;
  }
  return &detail::spmm_rows_scalar<Index>;
}

// Cost model of the work split, in units of one gathered X row: a row's nnz plus one for writing
// its output row (so long runs of empty rows also spread across tasks).
constexpr std::int64_t kRowCost = 1;
// Tasks per thread: several, so work stealing evens out rows whose X gathers miss the cache more.
constexpr std::int64_t kTasksPerThread = 8;
// Below this many multiply-adds per task the task overhead (~1 us) starts to show.
constexpr std::int64_t kMinTaskFlops = 1 << 16;

template <typename Index>
void check_shapes(const CsrView<Index>& a, std::span<const float> x, std::int64_t n,
                  std::span<float> y) {
  if (a.rows < 0 || a.cols < 0) {
    throw InputError("spmm: A", "negative shape " + std::to_string(a.rows) + " x " +
                                    std::to_string(a.cols));
  }
  if (n < 0) throw InputError("spmm: n", "negative feature length " + std::to_string(n));
  if (static_cast<std::int64_t>(a.indptr.size()) != a.rows + 1) {
    throw InputError("spmm: A.indptr", std::to_string(a.indptr.size()) + " entries, expected rows + 1 = " +
                                           std::to_string(a.rows + 1));
  }
  if (a.values.size() != a.indices.size()) {
    throw InputError("spmm: A.values", std::to_string(a.values.size()) + " entries but A.indices has " +
                                           std::to_string(a.indices.size()));
  }
  if (a.indptr.front() != 0 || a.indptr.back() != static_cast<Index>(a.nnz())) {
    throw InputError("spmm: A.indptr", "must start at 0 and end at nnz = " + std::to_string(a.nnz()) +
                                           ", got [" + std::to_string(a.indptr.front()) + ", ..., " +
                                           std::to_string(a.indptr.back()) + "]");
  }
  if (static_cast<std::int64_t>(x.size()) < a.cols * n) {
    throw InputError("spmm: X", std::to_string(x.size()) + " floats, need cols * n = " +
                                    std::to_string(a.cols * n));
  }
  if (static_cast<std::int64_t>(y.size()) < a.rows * n) {
    throw InputError("spmm: Y", std::to_string(y.size()) + " floats, need rows * n = " +
                                    std::to_string(a.rows * n));
  }
}

// One row holding more nnz than a task's share is cut into nnz pieces that run in parallel, each
// summing into its own partial row, then the partials are added in piece order.
template <typename Index>
void heavy_row(SpmmRowsFn<Index> fn, const SpmmOperands<Index>& op, std::int64_t row,
               std::int64_t piece_nnz, std::int64_t c0, std::int64_t c1, float* y_row) {
  const std::int64_t b = op.indptr[row];
  const std::int64_t e = op.indptr[row + 1];
  const std::int64_t pieces = (e - b + piece_nnz - 1) / piece_nnz;
  const std::int64_t n = op.n;
  std::vector<float> partial(static_cast<std::size_t>((pieces - 1) * n));
  tbb::parallel_for(std::int64_t{0}, pieces, [&](std::int64_t p) {
    const std::int64_t lo = b + p * piece_nnz;
    const std::int64_t hi = std::min(e, lo + piece_nnz);
    fn(op, row, row + 1, lo, hi, c0, c1, p == 0 ? y_row : partial.data() + (p - 1) * n);
  }, tbb::simple_partitioner{});
  for (std::int64_t p = 1; p < pieces; ++p) {
    const float* part = partial.data() + (p - 1) * n;
    for (std::int64_t c = c0; c < c1; ++c) y_row[c] += part[c];
  }
}

}  // namespace

namespace detail {

std::int64_t spmm_panel_width(std::int64_t cols, std::int64_t n, std::int64_t cache_bytes) {
  const std::int64_t col_bytes = std::max<std::int64_t>(cols, 1) * std::int64_t{sizeof(float)};
  if (n <= kMinPanel || col_bytes * n <= cache_bytes) return n;
  // Widest multiple of kPanelStep whose panel of X fits; none fits: panels would only re-read A.
  const std::int64_t fit = cache_bytes / col_bytes / kPanelStep * kPanelStep;
  if (fit < kMinPanel) return n;
  return std::min(fit, n);
}

std::int64_t llc_bytes() {
  static const std::int64_t bytes = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const long best = std::max(l3, l2);
    return best > 0 ? static_cast<std::int64_t>(best) : std::int64_t{8} << 20;
  }();
  return bytes;
}

std::int64_t spmm_default_panel(std::int64_t cols, std::int64_t n) {
  // Three quarters of the LLC: the rest holds the streamed A and Y lines passing through.
  return spmm_panel_width(cols, n, llc_bytes() / 4 * 3);
}

template <typename Index>
void spmm_panels(const CsrView<Index>& a, std::span<const float> x, std::int64_t n,
                 std::span<float> y, std::int64_t panel) {
  check_shapes(a, x, n, y);
  if (n == 0 || a.rows == 0) return;
  if (panel <= 0) throw InputError("spmm: panel", "must be positive, got " + std::to_string(panel));
  const SpmmRowsFn<Index> fn = pick_kernel<Index>(active_isa());
  const SpmmOperands<Index> op{a.indptr.data(), a.indices.data(), a.values.data(), x.data(), n};
  const std::int64_t rows = a.rows;
  const std::int64_t nnz = a.nnz();
  float* const y_data = y.data();

  const std::int64_t total_cost = nnz + rows * kRowCost;
  const std::int64_t threads = std::max(1, tbb::this_task_arena::max_concurrency());
  const std::int64_t tasks = std::clamp<std::int64_t>(total_cost * n / kMinTaskFlops, 1,
                                                      threads * kTasksPerThread);
  if (tasks == 1) {
    for (std::int64_t c0 = 0; c0 < n; c0 += panel) fn(op, 0, rows, 0, nnz, c0, std::min(n, c0 + panel), y_data);
    return;
  }
  const std::int64_t task_cost = (total_cost + tasks - 1) / tasks;
  const std::int64_t heavy_nnz = std::max<std::int64_t>(task_cost, 256);

  // Task t covers the rows whose prefix cost indptr[r] + r * kRowCost starts in
  // [t * task_cost, (t + 1) * task_cost): a binary search over indptr, no pass over the rows.
  auto row_at_cost = [&](std::int64_t cost) -> std::int64_t {
    std::int64_t lo = 0, hi = rows;  // first r with prefix(r) >= cost, in [0, rows]
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<std::int64_t>(a.indptr[mid]) + mid * kRowCost < cost) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(tasks + 1));
  for (std::int64_t t = 0; t < tasks; ++t) bounds[t] = row_at_cost(t * task_cost);
  bounds[tasks] = rows;
  // Panels run one after the other, so all threads gather from the same panel of X at a time.
  for (std::int64_t c0 = 0; c0 < n; c0 += panel) {
    const std::int64_t c1 = std::min(n, c0 + panel);
    tbb::parallel_for(std::int64_t{0}, tasks, [&](std::int64_t t) {
      const std::int64_t r1 = bounds[t + 1];
      std::int64_t r = bounds[t];
      while (r < r1) {
        std::int64_t h = r;
        while (h < r1 && a.indptr[h + 1] - a.indptr[h] <= heavy_nnz) ++h;
        if (h > r) fn(op, r, h, 0, nnz, c0, c1, y_data + r * n);
        if (h < r1) heavy_row(fn, op, h, heavy_nnz, c0, c1, y_data + h * n);
        r = h + 1;
      }
    }, tbb::simple_partitioner{});
  }
}

template void spmm_panels<std::int32_t>(const CsrView<std::int32_t>&, std::span<const float>,
                                        std::int64_t, std::span<float>, std::int64_t);
template void spmm_panels<std::int64_t>(const CsrView<std::int64_t>&, std::span<const float>,
                                        std::int64_t, std::span<float>, std::int64_t);

}  // namespace detail

namespace {

template <typename Index>
void spmm_impl(const CsrView<Index>& a, std::span<const float> x, std::int64_t n,
               std::span<float> y) {
  detail::spmm_panels(a, x, n, y, detail::spmm_default_panel(a.cols, n));
}

}  // namespace

void spmm(const CsrView<std::int32_t>& a, std::span<const float> x, std::int64_t n,
          std::span<float> y) {
  spmm_impl(a, x, n, y);
}

void spmm(const CsrView<std::int64_t>& a, std::span<const float> x, std::int64_t n,
          std::span<float> y) {
  spmm_impl(a, x, n, y);
}

}  // namespace dype::kernels::cpu
