#pragma once
// Online refinement of a fitted model from measured stage times (StarPU-style lifecycle:
// calibrate, persist, refine online, reject outliers).
//
// The fitted model stays fixed; refinement learns a multiplicative correction in log space,
//   log(measured / fitted) ~= a + b (log size - log size_ref),
// by recursive least squares with a forgetting factor. Each measurement is gated first: a residual
// beyond max(min_gate, gate_sigmas * robust scale) is rejected and does not touch the state, so a
// single 10x timing spike moves nothing. A persistent shift (the device really got slower) shows up
// as a run of same-sign rejections and is then accepted as a regime change. Every accepted update
// bumps `version`; reset() returns to the fitted model.
#include <cstdint>

namespace dype::perf {

struct RefineOptions {
  double forgetting = 0.98;        // RLS memory ~ 1 / (1 - forgetting) samples
  double gate_sigmas = 4.0;        // reject |residual| > gate_sigmas * scale ...
  double min_gate = 0.25;          // ... but never gate tighter than this (log-ratio, ~28%)
  int regime_change_after = 6;     // consecutive same-sign rejections that mean a real change
  double max_abs_log_correction = 2.3;  // |a| <= log(10): refinement never trumps the fit by >10x
};

enum class RefineOutcome : std::uint8_t { accepted, rejected_outlier, accepted_regime_change };

class Refinement {
 public:
  Refinement() { reset(); }

  // Multiplicative factor for a prediction whose size feature is `size` (1 when unrefined).
  double factor(double size) const;
  // Feeds one measurement of an invocation whose fitted prediction was `fitted_s`.
  RefineOutcome update(double size, double fitted_s, double measured_s,
                       const RefineOptions& options = {});
  // Back to the fitted model (version 0).
  void reset();

  // Reference log size (set from the training data when the model is fitted).
  double log_size_ref = 0.0;

  // State, public for persistence in the model store.
  std::uint64_t version = 0;  // accepted updates since the fit or the last reset
  double a = 0.0;
  double b = 0.0;
  double p00 = 0, p01 = 0, p11 = 0;  // RLS covariance
  double scale = 0.1;                 // robust residual scale (EWMA of |residual|)
  std::uint64_t accepted = 0;
  std::uint64_t rejected = 0;
  int run_sign = 0;   // sign of the current run of rejections
  int run_length = 0;
  double run_sum = 0; // sum of the rejected residuals in the run

 private:
  void rls_step(double x1, double e, double forgetting);
  double log_size(double size) const;
};

}  // namespace dype::perf
