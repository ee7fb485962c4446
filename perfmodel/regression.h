#pragma once
// Fitting t = sum_i c_i f_i to timed samples. Rows are weighted by 1/t so the least-squares fit
// minimises relative error (MAPE is what the scheduler suffers from), coefficients flagged
// non-negative are kept >= 0 (Lawson-Hanson NNLS with free variables), a robust pass drops gross
// outliers, and accuracy is reported on held-out points the fit never saw.
#include <cstdint>
#include <span>
#include <vector>

#include <Eigen/Dense>

#include "perfmodel/features.h"

namespace dype::perf {

// One timed kernel invocation.
struct Sample {
  OpShape shape;
  double seconds = 0.0;
};

// min || diag(1/t) (A c - t) ||_2  s.t. c_i >= 0 where non_negative[i]. A is [samples x features].
// Columns are rescaled internally, so features spanning 1 .. 1e12 are fine. Throws dype::Error on
// empty input, mismatched sizes or non-positive times.
Eigen::VectorXd fit_relative_nnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& t,
                                  std::span<const bool> non_negative);

struct FitOptions {
  double holdout_fraction = 0.2;  // share of samples kept out of the fit to measure accuracy
  std::uint64_t seed = 0x5eed;    // which samples are held out (deterministic)
  // Robust pass: drop training points whose relative residual exceeds
  // max(outlier_min_rel, outlier_sigmas * 1.4826 * MAD) and refit.
  double outlier_sigmas = 5.0;
  double outlier_min_rel = 0.3;
};

struct FitStats {
  int samples = 0;         // all samples offered
  int train = 0;           // used by the final fit
  int holdout = 0;         // held out
  int rejected = 0;        // training points dropped as outliers
  double r2_holdout = 0;   // 1 - SS_res / SS_tot on held-out points (seconds)
  double mape_holdout = 0; // mean |pred - t| / t on held-out points
  double max_ape_holdout = 0;
  double mape_train = 0;
};

struct FitResult {
  std::vector<double> coefficients;
  FitStats stats;
  std::vector<bool> is_holdout;  // per input sample
};

// Fits the feature set to the samples. Needs at least features + 2 samples.
FitResult fit_model(const FeatureSet& fs, const FeatureParams& params,
                    std::span<const Sample> samples, const FitOptions& options = {});

// Accuracy of given coefficients on samples: MAPE, max APE, R^2.
struct Accuracy {
  int n = 0;
  double mape = 0;
  double max_ape = 0;
  double r2 = 0;
};
Accuracy evaluate(std::span<const double> predicted_s, std::span<const double> measured_s);

}  // namespace dype::perf
