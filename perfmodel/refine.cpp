#include "perfmodel/refine.h"

#include <algorithm>
#include <cmath>

namespace dype::perf {

namespace {
constexpr double kP0Intercept = 0.05;  // prior variance of a (log units)
constexpr double kP0Slope = 0.005;     // prior variance of b per log-size unit
constexpr double kMinScale = 0.02;
}  // namespace

double Refinement::log_size(double size) const {
  return std::log(std::max(size, 1e-300)) - log_size_ref;
}

double ShapeHistory::median() const {
  // Insertion sort of at most kKept values (std::sort on a partial std::array trips GCC 12's
  // -Warray-bounds).
  double v[kKept];
  const int n = std::clamp(count, 0, kKept);
  for (int i = 0; i < n; ++i) {
    const double x = log_ratios[static_cast<std::size_t>(i)];
    int j = i;
    for (; j > 0 && v[j - 1] > x; --j) v[j] = v[j - 1];
    v[j] = x;
  }
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

const ShapeHistory* Refinement::history_of(std::uint64_t shape_key) const {
  for (const auto& h : history)
    if (h.key == shape_key) return &h;
  return nullptr;
}

void Refinement::record(std::uint64_t shape_key, double log_ratio, const RefineOptions& options) {
  if (shape_key == 0 || options.history_shapes <= 0) return;
  ShapeHistory* h = nullptr;
  for (auto& x : history)
    if (x.key == shape_key) h = &x;
  if (!h) {
    if (static_cast<int>(history.size()) < options.history_shapes) {
      h = &history.emplace_back();
    } else {
      h = &*std::min_element(history.begin(), history.end(),
                             [](const ShapeHistory& x, const ShapeHistory& y) { return x.last_used < y.last_used; });
      *h = ShapeHistory{};
    }
    h->key = shape_key;
  }
  h->log_ratios[static_cast<std::size_t>(h->next)] =
      std::clamp(log_ratio, -options.max_abs_log_correction, options.max_abs_log_correction);
  h->next = (h->next + 1) % ShapeHistory::kKept;
  h->count = std::min(h->count + 1, ShapeHistory::kKept);
  h->last_used = ++history_clock;
}

double Refinement::factor(double size, std::uint64_t shape_key) const {
  if (shape_key != 0) {
    const ShapeHistory* h = history_of(shape_key);
    if (h && h->count >= ShapeHistory::kMinSamples) return std::exp(h->median());
  }
  if (version == 0) return 1.0;
  // Clamp the slope term's lever arm: far outside the data the correction must not explode.
  const double x1 = std::clamp(log_size(size), -10.0, 10.0);
  return std::exp(a + b * x1);
}

void Refinement::reset() {
  version = 0;
  a = b = 0.0;
  p00 = kP0Intercept;
  p01 = 0.0;
  p11 = kP0Slope;
  scale = 0.1;
  accepted = rejected = 0;
  run_sign = run_length = 0;
  run_sum = 0.0;
  history.clear();
  history_clock = 0;
}

void Refinement::lower_trust() {
  p00 = kP0Intercept;
  p01 = 0.0;
  p11 = kP0Slope;
  scale = 0.1;
  run_sign = run_length = 0;
  run_sum = 0.0;
  history.clear();
  history_clock = 0;
}

void Refinement::rls_step(double x1, double e, double forgetting) {
  // Standard RLS for x = [1, x1]: gain k = P x / (lambda + x'Px), theta += k e, P = (P - k x'P)/lambda.
  const double px0 = p00 + p01 * x1;
  const double px1 = p01 + p11 * x1;
  const double denom = forgetting + px0 + px1 * x1;
  const double k0 = px0 / denom;
  const double k1 = px1 / denom;
  a += k0 * e;
  b += k1 * e;
  const double n00 = (p00 - k0 * px0) / forgetting;
  const double n01 = (p01 - k0 * px1) / forgetting;
  const double n11 = (p11 - k1 * px1) / forgetting;
  // Bound the covariance so long quiet periods do not make the next sample overly influential.
  p00 = std::min(n00, kP0Intercept);
  p01 = n01;
  p11 = std::min(n11, kP0Slope);
}

RefineOutcome Refinement::update(double size, double fitted_s, double measured_s,
                                 const RefineOptions& options, std::uint64_t shape_key) {
  if (!(fitted_s > 0) || !(measured_s > 0) || !std::isfinite(fitted_s) ||
      !std::isfinite(measured_s)) {
    ++rejected;
    return RefineOutcome::rejected_outlier;
  }
  const double x1 = std::clamp(log_size(size), -10.0, 10.0);
  const double y = std::log(measured_s / fitted_s);
  record(shape_key, y, options);
  const double e = y - (version == 0 ? 0.0 : a + b * x1);
  const double gate = std::max(options.min_gate, options.gate_sigmas * scale);
  RefineOutcome outcome = RefineOutcome::accepted;
  if (std::abs(e) > gate) {
    const int sign = e > 0 ? 1 : -1;
    if (sign == run_sign) {
      ++run_length;
      run_sum += e;
    } else {
      run_sign = sign;
      run_length = 1;
      run_sum = e;
    }
    if (run_length < options.regime_change_after) {
      ++rejected;
      return RefineOutcome::rejected_outlier;
    }
    // A sustained shift: jump the intercept to the run's mean residual and reopen the covariance.
    a += run_sum / run_length;
    p00 = kP0Intercept;
    p11 = kP0Slope;
    p01 = 0.0;
    scale = std::max(scale, std::abs(run_sum / run_length) / options.gate_sigmas);
    run_sign = run_length = 0;
    run_sum = 0.0;
    outcome = RefineOutcome::accepted_regime_change;
  } else {
    run_sign = run_length = 0;
    run_sum = 0.0;
    rls_step(x1, e, options.forgetting);
    scale = std::max(kMinScale, 0.9 * scale + 0.1 * std::abs(e));
  }
  a = std::clamp(a, -options.max_abs_log_correction, options.max_abs_log_correction);
  b = std::clamp(b, -1.0, 1.0);
  ++accepted;
  ++version;
  return outcome;
}

}  // namespace dype::perf
