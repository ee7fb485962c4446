#pragma once
// Drift detection: a sliding window over request characteristics (nodes, nnz, feature length,
// sequence length, window) compared with the characteristics the current plan was made for, plus
// measured-vs-predicted stage times. Hysteresis: a characteristic must differ by more than
// `threshold` (5% by default) on `sustain` consecutive requests, in the same direction; rate
// limit: at most one signal every `min_requests_between` requests. The engine answers a signal by
// asking the scheduler for a plan and swaps only when the predicted gain beats `min_gain`.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace dype::rt {

struct DriftOptions {
  bool enabled = true;
  double threshold = 0.05;        // relative change of a characteristic
  int sustain = 8;                // consecutive requests beyond the threshold
  int window = 32;                // requests (and stage samples) kept
  int min_requests_between = 16;  // rate limit between signals
  double min_gain = 0.05;         // swap only when old period / new period - 1 exceeds it
  double stage_time_threshold = 0.25;  // relative drift of measured/predicted stage time ratio
};

struct DriftSignal {
  std::string characteristic;  // "nnz", "seq_len", "stage1.time", ...
  std::string detail;          // human-readable cause
  Characteristics target;      // what to plan for (mean of the sustained requests)
};

// What the detector watches now, for an operator's view (the daemon's status page): each
// characteristic's value when planned against the mean of the recent window, and each stage's
// measured/predicted ratio when planned against the latest; `options` holds the thresholds.
struct DriftWatch {
  struct Field {
    std::string name;       // "nnz"
    double baseline = 0.0;  // what the current plan was made for
    double recent = 0.0;    // mean over the recent window (the baseline before any request)
    double change = 0.0;    // recent relative to baseline, as the threshold is applied
  };
  struct Stage {
    int stage = 0;
    double planned_ratio = 0.0;  // measured/predicted over the first window after the plan (0: not yet)
    double recent_ratio = 0.0;   // the latest sample's
    double change = 0.0;         // recent / planned - 1 (0 before the planned ratio is known)
  };
  std::vector<Field> fields;
  std::vector<Stage> stages;
  int streak = 0;            // consecutive requests beyond the threshold
  std::string streak_field;  // the characteristic that moved most on the latest of them
  int window_requests = 0;   // requests in the recent window
  DriftOptions options;
};

class DriftDetector {
 public:
  explicit DriftDetector(DriftOptions options = {}, Characteristics baseline = {});

  // Called per request, in submission order (not thread-safe; the engine serialises).
  std::optional<DriftSignal> observe(const Characteristics& c, std::uint64_t request_index);
  // Measured (or modelled, on emulated devices) vs predicted time of one stage for one request.
  // `request_index`: the request's submission index; samples of requests submitted before the
  // last rebase ran on the previous plan (or were predicted for other characteristics) and are
  // ignored, so they cannot become the new plan's baseline. Omitted: always counted.
  void observe_stage_time(int stage, double predicted_s, double measured_s,
                          std::uint64_t request_index = UINT64_MAX);
  // The plan now matches `baseline` (after a swap or a rejected re-plan).
  void rebase(const Characteristics& baseline, std::uint64_t request_index);
  const Characteristics& baseline() const { return baseline_; }
  const DriftOptions& options() const { return options_; }
  DriftWatch watch() const;

 private:
  DriftOptions options_;
  Characteristics baseline_;
  std::deque<Characteristics> recent_;
  int streak_ = 0;
  int streak_sign_ = 0;
  std::string streak_field_;
  std::uint64_t last_signal_ = 0;
  std::uint64_t rebased_at_ = 0;  // first request index of the current plan
  bool signalled_once_ = false;
  // Stage-time ratios: baseline established from the first `window` samples after a rebase.
  struct StageRatio {
    std::deque<double> samples;
    double base = 0.0;
    int streak = 0;
  };
  std::vector<StageRatio> stages_;
  std::optional<DriftSignal> pending_stage_signal_;
};

}  // namespace dype::rt
