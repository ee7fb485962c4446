#pragma once
// A fitted kernel performance model for one (device model, kernel): coefficients over a feature
// set, the feature ranges it was fitted on, fit statistics, the samples behind it, and its online
// refinement state. Prediction is a few multiplies and a range check (tens of ns).
//
//   dype::perf::ModelStore store = dype::perf::ModelStore::load("configs/perfmodels/cpu.json");
//   auto p = store.at(OpKind::spmm).predict(shape);   // p.seconds, p.extrapolated
#include <cstdint>
#include <string>
#include <vector>

#include "perfmodel/features.h"
#include "perfmodel/refine.h"
#include "perfmodel/regression.h"

namespace dype::perf {

struct FeatureRange {
  double min = 0;
  double max = 0;
};

struct Prediction {
  double seconds = 0;
  bool extrapolated = false;  // some feature lies outside the range the model was fitted on
  int out_of_range_feature = -1;  // first such feature (index into the feature set), -1 if none
};

// A stored sample (what the fit saw), kept so `dype-profile show` and `--plot` can recompute.
struct StoredSample {
  OpShape shape;
  double seconds = 0;
  bool holdout = false;
};

// A nonzero 64-bit key of an exact shape (every OpShape field), for the refinement's shape history.
std::uint64_t shape_key(const OpShape& shape);

class KernelModel {
 public:
  KernelModel() = default;
  // A model from a fit: copies coefficients, stats, ranges over the training samples, and sets
  // the refinement reference size.
  KernelModel(const FeatureSet& features, const FeatureParams& params, const FitResult& fit,
              std::span<const Sample> samples);

  Prediction predict(const OpShape& shape) const;   // fitted model x refinement
  double predict_fitted_s(const OpShape& shape) const;  // the fit alone
  // Online refinement with a measured time for `shape`.
  RefineOutcome refine(const OpShape& shape, double measured_s, const RefineOptions& options = {});
  void reset_refinement() { refinement.reset(); }

  const FeatureSet* features = nullptr;
  FeatureParams params;
  std::vector<double> coefficients;
  std::vector<FeatureRange> ranges;
  FitStats stats;
  Refinement refinement;
  std::vector<StoredSample> samples;

 private:
  double fitted(const double* f) const;
};

}  // namespace dype::perf
