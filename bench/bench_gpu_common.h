#pragma once
// What the GPU benchmarks (bench_gpu_kernels, bench_gpu_overlap) share: their flags (the SpMM
// graph's size, repetitions, an optional system file instead of detection) and moving host vectors
// onto a device.
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "hw/device.h"

namespace dype::bench {

struct GpuBenchArgs {
  int reps = 7;
  std::int64_t nodes = 100000;
  std::int64_t nnz = 2000000;
  std::int64_t features = 128;
  std::string system;  // "" = detect
};

// `--reps N --nodes N --nnz N --features N --system FILE` over `defaults`; a bad or unknown flag
// is reported under `program` and exits 2.
inline GpuBenchArgs parse_gpu_bench_args(int argc, char** argv, const char* program, GpuBenchArgs a) {
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", program, key.c_str());
      std::exit(2);
    }
    if (key == "--system") {
      a.system = argv[i + 1];
      continue;
    }
    const long long v = std::atoll(argv[i + 1]);
    if (v <= 0) {
      std::fprintf(stderr, "%s: %s must be a positive integer, got '%s'\n", program, key.c_str(), argv[i + 1]);
      std::exit(2);
    }
    if (key == "--reps") a.reps = static_cast<int>(v);
    else if (key == "--nodes") a.nodes = v;
    else if (key == "--nnz") a.nnz = v;
    else if (key == "--features") a.features = v;
    else {
      std::fprintf(stderr, "%s: unknown option %s (--reps, --nodes, --nnz, --features, --system)\n", program,
                   key.c_str());
      std::exit(2);
    }
  }
  return a;
}

template <typename T>
hw::BufferPtr upload(hw::Device& d, const std::vector<T>& v) {
  auto b = d.allocate(v.size() * sizeof(T));
  d.copy_from_host(*b, std::as_bytes(std::span<const T>(v)));
  return b;
}

}  // namespace dype::bench
