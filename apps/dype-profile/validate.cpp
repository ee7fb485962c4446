#include "apps/dype-profile/validate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include "graph/characteristics.h"
#include "graph/gather_locality.h"

namespace dype::profile_app {
namespace {

using kernels::OpKind;

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", v * 100);
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Prints the graph's size, skew and gather miss-ratio curve; returns the curve.
kernels::GatherLocality describe_graph(const kernels::CsrI32& a, const std::string& graph_name, double skew) {
  const auto t0 = std::chrono::steady_clock::now();
  const kernels::GatherLocality locality = kernels::gather_locality(a.indices, a.cols);
  const double locality_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("graph %s: %lld nodes, %lld nnz (A + A^T), density %.3g, degree skew %.1f\n",
              graph_name.c_str(), static_cast<long long>(a.rows), static_cast<long long>(a.nnz()),
              static_cast<double>(a.nnz()) / (static_cast<double>(a.rows) * a.cols), skew);
  std::printf("gather miss ratio (computed in %.1f ms) by cache size in rows of X (random ids would miss):", locality_ms);
  const kernels::GatherLocality random = kernels::GatherLocality::uniform(a.cols, a.nnz());
  for (int i = 0; i < kernels::GatherLocality::kLevels; i += 2) {
    const auto l = static_cast<std::size_t>(i);
    std::printf("  %.0f: %.3f (%.3f)", kernels::GatherLocality::rows(i), locality.miss[l], random.miss[l]);
  }
  std::printf("\n");
  return locality;
}

// The table: per N the measured time, then each store's prediction and its error. Returns the
// predictions, one vector per store.
std::vector<std::vector<double>> print_table(const std::vector<perf::ModelStore>& stores,
                                             const std::vector<std::string>& names,
                                             const std::vector<std::int64_t>& ns, const std::vector<double>& measured,
                                             const std::function<kernels::OpShape(std::int64_t)>& shape_for) {
  std::printf("%6s %12s", "N", "measured_ms");
  for (const auto& name : names) std::printf(" %14s %7s", (name + "_ms").c_str(), "APE");
  std::printf("\n");
  std::vector<std::vector<double>> predicted(stores.size());
  for (std::size_t i = 0; i < ns.size(); ++i) {
    std::printf("%6lld %12.4f", static_cast<long long>(ns[i]), measured[i] * 1e3);
    bool extrapolated = false;
    for (std::size_t m = 0; m < stores.size(); ++m) {
      const perf::Prediction p = stores[m].at(OpKind::spmm).predict(shape_for(ns[i]));
      predicted[m].push_back(p.seconds);
      extrapolated = extrapolated || p.extrapolated;
      std::printf(" %14.4f %7s", p.seconds * 1e3, pct(std::abs(p.seconds - measured[i]) / measured[i]).c_str());
    }
    std::printf("%s\n", extrapolated ? "  (extrapolated)" : "");
  }
  return predicted;
}

}  // namespace

std::vector<double> validate_measured(const kernels::CsrI32& a, const std::string& graph_name,
                                      const std::vector<perf::MeasuredTime>& times, const std::string& source,
                                      const std::vector<perf::ModelStore>& stores,
                                      const std::vector<std::string>& names) {
  const double skew = kernels::degree_skew(a.indptr);
  const kernels::GatherLocality locality = describe_graph(a, graph_name, skew);
  std::vector<std::int64_t> ns;
  std::vector<double> measured;
  for (const auto& t : times) {
    ns.push_back(t.n);
    measured.push_back(t.seconds);
  }
  std::printf("measured times: %s (taken elsewhere, not timed here)\n", source.c_str());
  const auto predicted = print_table(stores, names, ns, measured, [&](std::int64_t n) {
    return kernels::spmm_shape(a.view(), n, skew, locality);
  });
  std::vector<double> mapes;
  for (std::size_t m = 0; m < stores.size(); ++m) {
    const auto acc = perf::evaluate(predicted[m], measured);
    const std::string fid(stores[m].at(OpKind::spmm).features->id);
    const std::string what = names[m] == fid ? fid : names[m] + " (" + fid + ")";
    std::printf("%s of %s on %s: MAPE %s (max %s, %d points, times measured elsewhere)\n", what.c_str(),
                stores[m].device_model.c_str(), graph_name.c_str(), pct(acc.mape).c_str(), pct(acc.max_ape).c_str(),
                acc.n);
    mapes.push_back(acc.mape);
  }
  return mapes;
}

void validate_graph(hw::Device& dev, const kernels::CsrI32& a, const std::string& graph_name,
                    const std::vector<perf::ModelStore>& stores, const std::vector<std::string>& names,
                    const ValidateOptions& opt) {
  const double skew = kernels::degree_skew(a.indptr);
  const kernels::GatherLocality locality = describe_graph(a, graph_name, skew);
  auto shape_for = [&](std::int64_t n) { return kernels::spmm_shape(a.view(), n, skew, locality); };
  auto time_once = [&](std::int64_t n) { return perf::time_spmm(dev, a, n, {}, opt.clock).median_s; };

  // Rounds interleave the feature lengths so a slow minute on a shared machine hits each N once.
  const std::size_t nn = opt.feature_lens.size();
  auto measure = [&] {
    std::vector<std::vector<double>> times(nn);
    for (int round = 0; round < opt.rounds; ++round)
      for (std::size_t i = 0; i < nn; ++i) times[i].push_back(time_once(opt.feature_lens[i]));
    std::vector<double> m(nn);
    for (std::size_t i = 0; i < nn; ++i) m[i] = median(times[i]);
    return m;
  };
  const std::vector<double> measured = measure();
  if (!opt.save_measured_csv.empty()) {
    std::ofstream csv(opt.save_measured_csv);
    if (!csv) throw InputError("--save-measured " + opt.save_measured_csv, "cannot be written");
    csv << "N,measured_ms\n";
    for (std::size_t i = 0; i < nn; ++i) csv << opt.feature_lens[i] << ',' << measured[i] * 1e3 << '\n';
    std::printf("(measured times written to %s)\n", opt.save_measured_csv.c_str());
  }
  const std::vector<std::vector<double>> predicted = print_table(stores, names, opt.feature_lens, measured, shape_for);

  // Online refinement as the daemon runs it: each request launches SpMM once per N (a GNN's layers
  // at their widths) and refines the model with that launch's own time.
  std::vector<perf::KernelModel> refined;
  for (const auto& st : stores) refined.push_back(st.at(OpKind::spmm));
  for (int r = 0; r < opt.refine_requests; ++r)
    for (std::size_t i = 0; i < nn; ++i) {
      const double t = time_once(opt.feature_lens[i]);
      for (auto& m : refined) m.refine(shape_for(opt.feature_lens[i]), t);
    }
  // The refined model is checked against a fresh measurement taken after the requests: the machine
  // the requests ran on, not the one of the first measurement (a shared machine's speed drifts
  // within minutes, and refinement follows it). The fitted model's error against the same fresh
  // times shows how much of the change is drift.
  const std::vector<double> measured_after = opt.refine_requests > 0 ? measure() : measured;
  const char* where = dev.info().time_source == hw::TimeSource::modelled ? "modelled" : "measured";
  for (std::size_t m = 0; m < stores.size(); ++m) {
    const auto fitted = perf::evaluate(predicted[m], measured);
    const auto fitted_later = perf::evaluate(predicted[m], measured_after);
    std::vector<double> after;
    for (std::size_t i = 0; i < nn; ++i) after.push_back(refined[m].predict(shape_for(opt.feature_lens[i])).seconds);
    const auto ref = perf::evaluate(after, measured_after);
    std::printf("%s on a real graph the fit never saw: MAPE %s (max %s, R^2 %.4f, %d points, %s); after %d "
                "requests of online refinement: MAPE %s (max %s) against a fresh measurement (the fitted model "
                "against it: %s)\n",
                names[m].c_str(), pct(fitted.mape).c_str(), pct(fitted.max_ape).c_str(), fitted.r2, fitted.n,
                where, opt.refine_requests, pct(ref.mape).c_str(), pct(ref.max_ape).c_str(),
                pct(fitted_later.mape).c_str());
  }
}

}  // namespace dype::profile_app
