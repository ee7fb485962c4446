#pragma once
// Small helpers the benchmarks share: flags given as `--name value`, the machine's load (printed
// beside every measured figure: this VM is shared) and percentiles of samples.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace dype::bench {

// The value after `--name` on the command line, else `fallback`.
inline std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}

// /proc/loadavg's 1, 5 and 15 minute figures.
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// The p-quantile (0..1) of `v`, the sample at rank floor(p (n - 1)); 0 for no samples.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace dype::bench
