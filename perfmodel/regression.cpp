#include "perfmodel/regression.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "common/error.h"
#include "perfmodel/model.h"

namespace dype::perf {
namespace {

// What identifies a sample's input apart from the feature length an SpMM graph was timed at.
std::uint64_t input_key(OpShape shape) {
  if (shape.kind == kernels::OpKind::spmm) shape.n = 0;
  return shape_key(shape);
}

// Least squares restricted to the columns in `passive`; other entries are zero.
Eigen::VectorXd solve_passive(const Eigen::MatrixXd& b, const Eigen::VectorXd& y,
                              const std::vector<bool>& passive) {
  const Eigen::Index n = b.cols();
  std::vector<Eigen::Index> cols;
  for (Eigen::Index j = 0; j < n; ++j) {
    if (passive[static_cast<std::size_t>(j)]) cols.push_back(j);
  }
  Eigen::VectorXd z = Eigen::VectorXd::Zero(n);
  if (cols.empty()) return z;
  Eigen::MatrixXd sub(b.rows(), static_cast<Eigen::Index>(cols.size()));
  for (std::size_t i = 0; i < cols.size(); ++i) sub.col(static_cast<Eigen::Index>(i)) = b.col(cols[i]);
  const Eigen::VectorXd zs = sub.colPivHouseholderQr().solve(y);
  for (std::size_t i = 0; i < cols.size(); ++i) z(cols[i]) = zs(static_cast<Eigen::Index>(i));
  return z;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  double m = *mid;
  if (v.size() % 2 == 0) m = 0.5 * (m + *std::max_element(v.begin(), mid));
  return m;
}

}  // namespace

Eigen::VectorXd fit_relative_nnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& t,
                                  std::span<const bool> non_negative) {
  const Eigen::Index m = a.rows();
  const Eigen::Index n = a.cols();
  if (m == 0 || n == 0) throw Error("fit_relative_nnls: no samples or no features");
  if (t.size() != m || static_cast<Eigen::Index>(non_negative.size()) != n) {
    throw Error("fit_relative_nnls: size mismatch between design matrix, times and constraints");
  }
  if (!a.allFinite() || !t.allFinite() || (t.array() <= 0).any()) {
    throw Error("fit_relative_nnls: times must be positive and features finite");
  }
  // Relative weighting: row i divided by t_i, target 1.
  Eigen::MatrixXd b = a.array().colwise() / t.array();
  const Eigen::VectorXd y = Eigen::VectorXd::Ones(m);
  // Column scaling for conditioning; an all-zero column stays zero (coefficient 0).
  Eigen::VectorXd scale(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const double s = b.col(j).norm();
    scale(j) = s > 0 ? s : 1.0;
    b.col(j) /= scale(j);
  }

  // Lawson-Hanson active set; unconstrained variables live in the passive set from the start.
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  for (Eigen::Index j = 0; j < n; ++j) passive[static_cast<std::size_t>(j)] = !non_negative[static_cast<std::size_t>(j)];
  Eigen::VectorXd x = solve_passive(b, y, passive);
  const double tol = 1e-12 * static_cast<double>(std::max(m, n));
  for (int outer = 0; outer < 3 * n + 10; ++outer) {
    const Eigen::VectorXd w = b.transpose() * (y - b * x);
    Eigen::Index best = -1;
    double best_w = tol;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!passive[static_cast<std::size_t>(j)] && w(j) > best_w) {
        best_w = w(j);
        best = j;
      }
    }
    if (best < 0) break;
    passive[static_cast<std::size_t>(best)] = true;
    Eigen::VectorXd z = solve_passive(b, y, passive);
    for (int inner = 0; inner < 3 * n + 10; ++inner) {
      double alpha = 1.0;
      bool infeasible = false;
      for (Eigen::Index j = 0; j < n; ++j) {
        const auto ju = static_cast<std::size_t>(j);
        if (passive[ju] && non_negative[ju] && z(j) <= 0) {
          infeasible = true;
          const double denom = x(j) - z(j);
          if (denom > 0) alpha = std::min(alpha, x(j) / denom);
        }
      }
      if (!infeasible) break;
      x += alpha * (z - x);
      for (Eigen::Index j = 0; j < n; ++j) {
        const auto ju = static_cast<std::size_t>(j);
        if (passive[ju] && non_negative[ju] && x(j) <= tol) {
          passive[ju] = false;
          x(j) = 0;
        }
      }
      z = solve_passive(b, y, passive);
    }
    if ((z - x).norm() <= tol) {
      x = z;
      break;  // adding the variable did not help (numerical stall)
    }
    x = z;
  }
  for (Eigen::Index j = 0; j < n; ++j) {
    if (non_negative[static_cast<std::size_t>(j)] && x(j) < 0) x(j) = 0;
  }
  return x.array() / scale.array();
}

Accuracy evaluate(std::span<const double> predicted_s, std::span<const double> measured_s) {
  Accuracy acc;
  acc.n = static_cast<int>(measured_s.size());
  if (acc.n == 0) return acc;
  double sum_ape = 0, mean = 0;
  for (double t : measured_s) mean += t;
  mean /= acc.n;
  double ss_res = 0, ss_tot = 0;
  for (std::size_t i = 0; i < measured_s.size(); ++i) {
    const double ape = std::abs(predicted_s[i] - measured_s[i]) / measured_s[i];
    sum_ape += ape;
    acc.max_ape = std::max(acc.max_ape, ape);
    ss_res += (predicted_s[i] - measured_s[i]) * (predicted_s[i] - measured_s[i]);
    ss_tot += (measured_s[i] - mean) * (measured_s[i] - mean);
  }
  acc.mape = sum_ape / acc.n;
  acc.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  return acc;
}

FitResult fit_model(const FeatureSet& fs, const FeatureParams& params,
                    std::span<const Sample> samples, const FitOptions& options) {
  const int nf = fs.size();
  const auto ns = static_cast<int>(samples.size());
  if (ns < nf + 2) {
    throw Error("fit " + std::string(fs.id) + ": " + std::to_string(ns) +
                " samples, need at least " + std::to_string(nf + 2));
  }
  Eigen::MatrixXd feats(ns, nf);
  Eigen::VectorXd t(ns);
  double f[kMaxFeatures];
  for (int i = 0; i < ns; ++i) {
    if (!(samples[static_cast<std::size_t>(i)].seconds > 0) ||
        !std::isfinite(samples[static_cast<std::size_t>(i)].seconds)) {
      throw Error("fit " + std::string(fs.id) + ": sample " + std::to_string(i) +
                  " has a non-positive or non-finite time");
    }
    fs.compute(samples[static_cast<std::size_t>(i)].shape, params, f);
    for (int j = 0; j < nf; ++j) feats(i, j) = f[j];
    t(i) = samples[static_cast<std::size_t>(i)].seconds;
  }

  // Deterministic hold-out choice, never more than leaves the fit determined. Whole inputs are held
  // out: the profiler times one SpMM graph at several feature lengths, and a held-out point whose
  // graph the fit saw at another N would flatter the held-out error.
  FitResult result;
  result.is_holdout.assign(static_cast<std::size_t>(ns), false);
  std::map<std::uint64_t, std::vector<int>> by_input;
  for (int i = 0; i < ns; ++i) by_input[input_key(samples[static_cast<std::size_t>(i)].shape)].push_back(i);
  std::vector<const std::vector<int>*> inputs;
  for (const auto& [key, rows] : by_input) inputs.push_back(&rows);
  std::mt19937_64 rng(options.seed);
  std::shuffle(inputs.begin(), inputs.end(), rng);
  const int max_holdout = ns - (nf + 2);
  const int n_holdout = std::clamp(static_cast<int>(std::lround(options.holdout_fraction * ns)),
                                   0, max_holdout);
  int held = 0;
  for (const std::vector<int>* rows : inputs) {
    if (held >= n_holdout) break;
    if (held + static_cast<int>(rows->size()) > max_holdout) continue;
    for (int i : *rows) result.is_holdout[static_cast<std::size_t>(i)] = true;
    held += static_cast<int>(rows->size());
  }

  std::vector<int> train;
  for (int i = 0; i < ns; ++i) {
    if (!result.is_holdout[static_cast<std::size_t>(i)]) train.push_back(i);
  }
  auto fit_on = [&](const std::vector<int>& rows) {
    Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()), nf);
    Eigen::VectorXd tt(static_cast<Eigen::Index>(rows.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      a.row(static_cast<Eigen::Index>(r)) = feats.row(rows[r]);
      tt(static_cast<Eigen::Index>(r)) = t(rows[r]);
    }
    return fit_relative_nnls(a, tt, fs.non_negative);
  };

  Eigen::VectorXd c = fit_on(train);
  // Robust pass: a few timing spikes must not bend the whole model.
  int rejected = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<double> rel;
    for (int i : train) rel.push_back((feats.row(i).dot(c) - t(i)) / t(i));
    const double med = median(rel);
    std::vector<double> dev;
    for (double r : rel) dev.push_back(std::abs(r - med));
    const double limit =
        std::max(options.outlier_min_rel, options.outlier_sigmas * 1.4826 * median(dev));
    std::vector<int> kept;
    for (std::size_t r = 0; r < train.size(); ++r) {
      if (std::abs(rel[r]) <= limit) kept.push_back(train[r]);
    }
    if (kept.size() == train.size() || static_cast<int>(kept.size()) < nf + 2) break;
    rejected += static_cast<int>(train.size() - kept.size());
    train = std::move(kept);
    c = fit_on(train);
  }

  result.coefficients.assign(c.data(), c.data() + c.size());
  std::vector<double> pred_h, meas_h, pred_t, meas_t;
  for (int i = 0; i < ns; ++i) {
    const double p = feats.row(i).dot(c);
    if (result.is_holdout[static_cast<std::size_t>(i)]) {
      pred_h.push_back(p);
      meas_h.push_back(t(i));
    }
  }
  for (int i : train) {
    pred_t.push_back(feats.row(i).dot(c));
    meas_t.push_back(t(i));
  }
  const Accuracy hold = evaluate(pred_h, meas_h);
  const Accuracy tr = evaluate(pred_t, meas_t);
  result.stats.samples = ns;
  result.stats.train = static_cast<int>(train.size());
  result.stats.holdout = held;
  result.stats.rejected = rejected;
  result.stats.r2_holdout = hold.r2;
  result.stats.mape_holdout = hold.mape;
  result.stats.max_ape_holdout = hold.max_ape;
  result.stats.mape_train = tr.mape;
  return result;
}

}  // namespace dype::perf
