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
//
// Shape history (StarPU's history-based model beside its regression): one correction in the size
// feature cannot fit two shapes of similar size that the fit mispredicts in opposite directions
// (a request's two GEMMs), so it swings between them. Each exact shape seen keeps its latest
// log(measured / fitted) ratios; once it has ShapeHistory::kMinSamples, its prediction is the fit
// times exp(median of them): a single spike among three moves nothing, a real shift wins after
// the majority of the kept samples. Shapes never seen use the RLS correction. The table keeps the
// `history_shapes` most recently used shapes.
#include <array>
#include <cstdint>
#include <vector>

namespace dype::perf {

struct RefineOptions {
  double forgetting = 0.98;        // RLS memory ~ 1 / (1 - forgetting) samples
  double gate_sigmas = 4.0;        // reject |residual| > gate_sigmas * scale ...
  double min_gate = 0.25;          // ... but never gate tighter than this (log-ratio, ~28%)
  int regime_change_after = 6;     // consecutive same-sign rejections that mean a real change
  double max_abs_log_correction = 2.3;  // |a| <= log(10): refinement never trumps the fit by >10x
  int history_shapes = 64;         // exact shapes remembered (least recently used evicted); 0: off
};

// The latest measured/fitted log ratios of one exact shape.
struct ShapeHistory {
  static constexpr int kKept = 5;
  static constexpr int kMinSamples = 3;  // before this many, the shape uses the RLS correction
  std::uint64_t key = 0;
  std::array<double, kKept> log_ratios{};
  int count = 0;                 // valid entries (<= kKept)
  int next = 0;                  // ring position of the next write
  std::uint64_t last_used = 0;   // Refinement::clock_ when last updated (LRU)
  double median() const;
};

enum class RefineOutcome : std::uint8_t { accepted, rejected_outlier, accepted_regime_change };

class Refinement {
 public:
  Refinement() { reset(); }

  // Multiplicative factor for a prediction whose size feature is `size` and whose exact shape is
  // `shape_key` (1 when unrefined): the shape's own history once it has kMinSamples, else the
  // RLS correction.
  double factor(double size, std::uint64_t shape_key = 0) const;
  // Feeds one measurement of an invocation whose fitted prediction was `fitted_s`. A nonzero
  // `shape_key` also records it in that shape's history (whatever the RLS gate decided: the
  // median is its own outlier guard).
  RefineOutcome update(double size, double fitted_s, double measured_s,
                       const RefineOptions& options = {}, std::uint64_t shape_key = 0);
  // The history of `shape_key`, or null.
  const ShapeHistory* history_of(std::uint64_t shape_key) const;
  // Back to the fitted model (version 0, no shape history).
  void reset();
  // Keeps the correction as a prior but trusts it no more than a fresh one: the covariance returns
  // to its initial value, so new measurements move it as fast as after a reset, and the shape
  // history is dropped. For a refinement made on another host, whose ratios belong to that host.
  void lower_trust();

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
  std::vector<ShapeHistory> history;  // at most RefineOptions::history_shapes
  std::uint64_t history_clock = 0;    // bumped per recorded sample (LRU order)

 private:
  void rls_step(double x1, double e, double forgetting);
  void record(std::uint64_t shape_key, double log_ratio, const RefineOptions& options);
  double log_size(double size) const;
};

}  // namespace dype::perf
