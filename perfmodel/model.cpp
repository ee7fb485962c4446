#include "perfmodel/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace dype::perf {

namespace {
// The smallest time a model reports: a kernel never takes zero time, and downstream code divides.
constexpr double kMinPredictionS = 1e-9;
// Relative slack on the range check so round-off at the boundary does not flag extrapolation.
constexpr double kRangeSlack = 1e-9;
}  // namespace

KernelModel::KernelModel(const FeatureSet& fs, const FeatureParams& p, const FitResult& fit,
                         std::span<const Sample> data)
    : features(&fs), params(p), coefficients(fit.coefficients), stats(fit.stats) {
  const int nf = fs.size();
  ranges.assign(static_cast<std::size_t>(nf),
                {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
  double f[kMaxFeatures];
  double log_sum = 0;
  int n_train = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const bool hold = i < fit.is_holdout.size() && fit.is_holdout[i];
    samples.push_back({data[i].shape, data[i].seconds, hold});
    fs.compute(data[i].shape, params, f);
    // The range covers every sample timed, held-out points included: all were seen on the device.
    for (int j = 0; j < nf; ++j) {
      auto& r = ranges[static_cast<std::size_t>(j)];
      r.min = std::min(r.min, f[j]);
      r.max = std::max(r.max, f[j]);
    }
    if (!hold) {
      log_sum += std::log(std::max(f[fs.size_feature], 1e-300));
      ++n_train;
    }
  }
  refinement.reset();
  refinement.log_size_ref = n_train > 0 ? log_sum / n_train : 0.0;
}

double KernelModel::fitted(const double* f) const {
  double t = 0;
  for (std::size_t j = 0; j < coefficients.size(); ++j) t += coefficients[j] * f[j];
  return std::max(t, kMinPredictionS);
}

double KernelModel::predict_fitted_s(const OpShape& shape) const {
  if (features == nullptr) throw Error("perf model used before it was fitted or loaded");
  double f[kMaxFeatures];
  features->compute(shape, params, f);
  return fitted(f);
}

Prediction KernelModel::predict(const OpShape& shape) const {
  if (features == nullptr) throw Error("perf model used before it was fitted or loaded");
  double f[kMaxFeatures];
  features->compute(shape, params, f);
  Prediction p;
  p.seconds = fitted(f) * refinement.factor(f[features->size_feature], shape_key(shape));
  for (std::size_t j = 0; j < ranges.size(); ++j) {
    const auto& r = ranges[j];
    if (f[j] < r.min - kRangeSlack * std::abs(r.min) || f[j] > r.max + kRangeSlack * std::abs(r.max)) {
      p.extrapolated = true;
      p.out_of_range_feature = static_cast<int>(j);
      break;
    }
  }
  return p;
}

RefineOutcome KernelModel::refine(const OpShape& shape, double measured_s,
                                  const RefineOptions& options) {
  if (features == nullptr) throw Error("perf model refined before it was fitted or loaded");
  double f[kMaxFeatures];
  features->compute(shape, params, f);
  return refinement.update(f[features->size_feature], fitted(f), measured_s, options, shape_key(shape));
}

std::uint64_t shape_key(const OpShape& s) {
  // FNV-1a over the fields; 0 is reserved for "no shape".
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  std::uint64_t skew_bits = 0;
  static_assert(sizeof skew_bits == sizeof s.degree_skew);
  std::memcpy(&skew_bits, &s.degree_skew, sizeof skew_bits);
  for (std::int64_t v : {static_cast<std::int64_t>(s.kind), s.m, s.k, s.n, s.nnz, s.seq_len, s.window, s.heads, s.head_dim})
    mix(static_cast<std::uint64_t>(v));
  mix(skew_bits);
  if (s.locality.known()) {
    for (float v : s.locality.miss) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      mix(bits);
    }
  }
  return h == 0 ? 1 : h;
}

}  // namespace dype::perf
