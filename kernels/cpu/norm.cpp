#include "kernels/cpu/norm.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/norm_internal.h"
#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

// Rows per task: ~16K elements, so tiny matrices stay on one thread and large ones split evenly.
constexpr std::int64_t kElementsPerTask = 16384;

std::int64_t grain_rows(std::int64_t cols) {
  return std::max<std::int64_t>(1, kElementsPerTask / std::max<std::int64_t>(1, cols));
}

void check_shape(const char* op, std::int64_t rows, std::int64_t cols) {
  if (rows < 0) {
    throw InputError(std::string(op) + ": rows", "must be >= 0, got " + std::to_string(rows));
  }
  if (cols < 0) {
    throw InputError(std::string(op) + ": cols", "must be >= 0, got " + std::to_string(cols));
  }
}

void check_span(const char* op, const char* name, std::size_t have, std::int64_t need) {
  if (static_cast<std::int64_t>(have) < need) {
    throw InputError(std::string(op) + ": " + name,
                     "has " + std::to_string(have) + " floats, needs " + std::to_string(need));
  }
}

}  // namespace

void softmax_rows(std::span<float> x, std::int64_t rows, std::int64_t cols) {
  check_shape("softmax_rows", rows, cols);
  check_span("softmax_rows", "x", x.size(), rows * cols);
  if (rows == 0 || cols == 0) return;
  auto fn = detail::softmax_rows_scalar;
  switch (active_isa()) {
    case Isa::avx512: fn = detail::softmax_rows_avx512; break;
    case Isa::avx2: fn = detail::softmax_rows_avx2; break;
    case Isa::scalar: break;
  }
  float* data = x.data();
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, grain_rows(cols)),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      fn(data, r.begin(), r.end(), cols);
                    });
}

void layer_norm_rows(std::span<const float> x, std::span<const float> gamma,
                     std::span<const float> beta, std::span<float> y, std::int64_t rows,
                     std::int64_t cols, float eps) {
  check_shape("layer_norm_rows", rows, cols);
  check_span("layer_norm_rows", "x", x.size(), rows * cols);
  check_span("layer_norm_rows", "y", y.size(), rows * cols);
  check_span("layer_norm_rows", "gamma", gamma.size(), cols);
  check_span("layer_norm_rows", "beta", beta.size(), cols);
  if (!(eps >= 0.0f) || !std::isfinite(eps)) {
    throw InputError("layer_norm_rows: eps", "must be finite and >= 0, got " + std::to_string(eps));
  }
  if (rows == 0 || cols == 0) return;
  auto fn = detail::layer_norm_rows_scalar;
  switch (active_isa()) {
    case Isa::avx512: fn = detail::layer_norm_rows_avx512; break;
    case Isa::avx2: fn = detail::layer_norm_rows_avx2; break;
    case Isa::scalar: break;
  }
  const float* xd = x.data();
  const float* gd = gamma.data();
  const float* bd = beta.data();
  float* yd = y.data();
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, grain_rows(cols)),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      fn(xd, gd, bd, yd, r.begin(), r.end(), cols, eps);
                    });
}

}  // namespace dype::kernels::cpu
