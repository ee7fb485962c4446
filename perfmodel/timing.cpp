#include "perfmodel/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "common/error.h"

namespace dype::perf {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  double m = *mid;
  if (v.size() % 2 == 0) m = 0.5 * (m + *std::max_element(v.begin(), mid));
  return m;
}

TimingResult time_repeated(const std::function<double()>& run_once, const TimingPolicy& policy) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto checked = [&] {
    const double t = run_once();
    if (!std::isfinite(t) || t < 0) throw Error("kernel timing returned an invalid duration");
    return t;
  };
  for (int i = 0; i < policy.warmup; ++i) checked();
  std::vector<double> times;
  double covered = 0;
  while (true) {
    const double t = checked();
    times.push_back(t);
    covered += t;
    const auto n = static_cast<int>(times.size());
    if (n >= policy.max_reps) break;
    const double spent = std::chrono::duration<double>(clock::now() - start).count();
    if (n >= policy.min_reps && (covered >= policy.min_total_s || spent >= policy.max_total_s)) break;
    // Long kernels: three repetitions still give a median that ignores one spike.
    if (n >= std::min(3, policy.min_reps) && spent >= policy.max_total_s) break;
  }
  TimingResult r;
  r.reps = static_cast<int>(times.size());
  const double med = median_of(times);
  std::vector<double> dev;
  dev.reserve(times.size());
  for (double t : times) dev.push_back(std::abs(t - med));
  const double mad = median_of(dev);
  // Spikes are one-sided on a shared machine (preemption only slows a run down), but a run that is
  // implausibly fast is dropped too. A floor of 1% of the median keeps identical runs (mad = 0,
  // emulated devices) from rejecting everything.
  const double limit = policy.outlier_sigmas * std::max(1.4826 * mad, 0.01 * med);
  std::vector<double> kept;
  for (double t : times) {
    if (std::abs(t - med) <= limit) kept.push_back(t);
  }
  r.rejected = r.reps - static_cast<int>(kept.size());
  r.median_s = median_of(kept);
  std::vector<double> kdev;
  for (double t : kept) kdev.push_back(std::abs(t - r.median_s));
  r.mad_s = median_of(kdev);
  r.spent_s = std::chrono::duration<double>(clock::now() - start).count();
  return r;
}

}  // namespace dype::perf
