#pragma once
// Repeated timing of one kernel invocation: warm-up runs, then repetitions until both a minimum
// count and a minimum total time are reached (or a maximum count), outliers beyond
// median + k * 1.4826 * MAD rejected, the median of the rest reported. On a shared, noisy machine
// the median over a robust set is what a later run will see, not the minimum or the mean.
#include <functional>
#include <vector>

namespace dype::perf {

struct TimingPolicy {
  int warmup = 1;
  int min_reps = 5;  // short kernels; long ones stop at 3 once max_total_s is spent
  int max_reps = 31;
  double min_total_s = 0.03;  // keep repeating short kernels until this much time is covered
  double max_total_s = 0.6;   // past this, stop after 3 repetitions (or min_reps if fewer)
  double outlier_sigmas = 3.0;
};

struct TimingResult {
  double median_s = 0;
  double mad_s = 0;   // median absolute deviation of the kept repetitions
  int reps = 0;       // timed repetitions (warm-up excluded)
  int rejected = 0;   // repetitions dropped as outliers
  double spent_s = 0; // wall time spent, warm-up included
};

// `run_once` runs the kernel once and returns its duration in seconds (a wall-clock measurement,
// or the device-reported time for emulated devices). Throws dype::Error if it returns a
// non-finite or negative time.
TimingResult time_repeated(const std::function<double()>& run_once, const TimingPolicy& policy = {});

// Median of the values (a copy is partially sorted).
double median_of(std::vector<double> values);

}  // namespace dype::perf
