#include "perfmodel/multi_device.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace dype::perf {

using kernels::OpKind;
using kernels::OpShape;

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
double d(std::int64_t v) { return static_cast<double>(v); }
}  // namespace

OpShape split_shape(const OpShape& s, int devices) {
  if (devices < 1) throw Error("split_shape: devices must be >= 1");
  if (devices == 1) return s;
  const std::int64_t c = devices;
  OpShape p = s;
  switch (s.kind) {
    case OpKind::spmm: {
      // Balanced by nnz: each part gets nnz / c, unless one row alone is heavier than that.
      const double mean_row = s.m > 0 ? d(s.nnz) / d(s.m) : 0.0;
      const double heaviest = s.degree_skew > 0 ? s.degree_skew * mean_row : mean_row;
      p.nnz = static_cast<std::int64_t>(std::ceil(std::max(d(s.nnz) / d(c), heaviest)));
      p.nnz = std::min(p.nnz, s.nnz);
      p.m = ceil_div(s.m, c);
      break;
    }
    case OpKind::gemm:
    case OpKind::softmax:
    case OpKind::layer_norm: p.m = ceil_div(s.m, c); break;
    case OpKind::window_attention:
      if (s.heads >= c) {
        p.heads = ceil_div(s.heads, c);
      } else {
        p.seq_len = std::min(s.seq_len, ceil_div(s.seq_len, c) + s.window);  // + halo both sides
        p.window = std::min(p.window, p.seq_len);
      }
      p.m = p.seq_len;
      p.k = p.n = p.heads * p.head_dim;
      break;
  }
  return p;
}

double scatter_bytes(const OpShape& s, int devices) {
  if (devices <= 1) return 0.0;
  const double c = devices;
  switch (s.kind) {
    case OpKind::spmm: return c * 4.0 * d(s.k) * d(s.n);  // X broadcast to every device
    case OpKind::gemm: return 4.0 * d(s.m) * d(s.k);       // row blocks of X
    case OpKind::softmax:
    case OpKind::layer_norm: return 4.0 * d(s.m) * d(s.n);
    case OpKind::window_attention: {
      const double dm = d(std::max<std::int64_t>(s.heads, 1)) * d(s.head_dim);
      if (s.heads >= devices) return 12.0 * d(s.seq_len) * dm;  // Q, K, V by heads
      return 12.0 * (d(s.seq_len) + (c - 1) * d(s.window)) * dm;  // halos sent twice
    }
  }
  return 0.0;
}

double gather_bytes(const OpShape& s, int devices) {
  if (devices <= 1) return 0.0;
  switch (s.kind) {
    case OpKind::spmm:
    case OpKind::gemm:
    case OpKind::softmax:
    case OpKind::layer_norm: return 4.0 * d(s.m) * d(s.n);
    case OpKind::window_attention:
      return 4.0 * d(s.seq_len) * d(std::max<std::int64_t>(s.heads, 1)) * d(s.head_dim);
  }
  return 0.0;
}

StagePrediction predict_stage(const KernelModel& model, const OpShape& shape, int devices,
                              const StageLink& link) {
  if (devices < 1) throw Error("predict_stage: devices must be >= 1, got " + std::to_string(devices));
  if (!(link.bandwidth_bytes_per_s > 0)) throw Error("predict_stage: link bandwidth must be > 0");
  StagePrediction out;
  out.part = split_shape(shape, devices);
  const Prediction p = model.predict(out.part);
  out.compute_s = p.seconds;
  out.extrapolated = p.extrapolated;
  if (devices > 1) {
    // One transfer per device through the root link, serialised on it.
    out.scatter_s = scatter_bytes(shape, devices) / link.bandwidth_bytes_per_s + devices * link.latency_s;
    out.gather_s = gather_bytes(shape, devices) / link.bandwidth_bytes_per_s + devices * link.latency_s;
  }
  out.total_s = out.scatter_s + out.compute_s + out.gather_s;
  return out;
}

}  // namespace dype::perf
