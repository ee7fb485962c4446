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

double Refinement::factor(double size) const {
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
                                 const RefineOptions& options) {
  if (!(fitted_s > 0) || !(measured_s > 0) || !std::isfinite(fitted_s) ||
      !std::isfinite(measured_s)) {
    ++rejected;
    return RefineOutcome::rejected_outlier;
  }
  const double x1 = std::clamp(log_size(size), -10.0, 10.0);
  const double y = std::log(measured_s / fitted_s);
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
