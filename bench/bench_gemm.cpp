// Dense GEMM Y = relu(X W + b), X [100000 x 128], W [128 x 128]: dype (oneDNN matmul with the
// epilogue fused, row blocks on oneTBB) vs plain dnnl_sgemm (no epilogue) and Eigen 3.4 (GEMM +
// bias + ReLU), same threads. All figures are measured.
//
//   bench_gemm [--threads=2] [--m=100000] [--k=128] [--n=128] [google benchmark flags]
//
// Thread control, made explicit: dype and Eigen run on the oneTBB arena (global_control); Debian's
// libdnnl uses OpenMP, so dnnl_sgemm gets omp_set_num_threads(threads) (looked up in the loaded
// libgomp) on the calling thread.

// Eigen is compiled for AVX-512 + FMA here so it is not held back to SSE2 by the baseline flags;
// main() checks the CPU first.
// Standard library, Google Benchmark and oneTBB headers come before the AVX-512 region: their
// always_inline functions must be compiled for the baseline target the rest of the file uses.
#include <benchmark/benchmark.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <complex>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512dq,avx512bw,avx512vl")
#include <Eigen/Core>

#include <cstdint>

namespace eigen_peer {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;

inline void gemm_rows(const Eigen::Map<const RowMat>& x, const Eigen::Map<const RowMat>& w,
                      const Eigen::Map<const RowVec>& b, Eigen::Map<RowMat>& y, std::int64_t r0,
                      std::int64_t rows) {
  auto out = y.middleRows(r0, rows);
  out.noalias() = x.middleRows(r0, rows) * w;
  out = (out.rowwise() + b).cwiseMax(0.0f);
}

}  // namespace eigen_peer
#pragma GCC pop_options

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa.h"
#include "graph/generators.h"

namespace {

using namespace dype::kernels;

int g_threads = 2;
std::int64_t g_m = 100000, g_k = 128, g_n = 128;

struct Problem {
  std::vector<float> x, w, b, y;
};

Problem& problem() {
  static Problem p{generate_features(g_m, g_k, 1), generate_features(g_k, g_n, 2),
                   generate_features(1, g_n, 3),
                   std::vector<float>(static_cast<std::size_t>(g_m * g_n))};
  return p;
}

void set_counters(benchmark::State& state) {
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * g_m * g_k * g_n * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = g_threads;
}

void BM_gemm_dype(benchmark::State& state) {
  Problem& p = problem();
  for (auto _ : state) {
    cpu::gemm(p.x, p.w, p.b, p.y, {g_m, g_k, g_n}, cpu::Epilogue::bias_relu);
    benchmark::ClobberMemory();
  }
  set_counters(state);
  state.SetLabel("bias+relu fused");
}

// The same work as dnnl_sgemm (no bias, no ReLU): the like-for-like comparison.
void BM_gemm_dype_plain(benchmark::State& state) {
  Problem& p = problem();
  for (auto _ : state) {
    cpu::gemm(p.x, p.w, p.b, p.y, {g_m, g_k, g_n}, cpu::Epilogue::none);
    benchmark::ClobberMemory();
  }
  set_counters(state);
  state.SetLabel("no epilogue");
}

void BM_gemm_dnnl_sgemm(benchmark::State& state) {
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) {
    fn(g_threads);
  }
  Problem& p = problem();
  for (auto _ : state) {
    const dnnl_status_t st = dnnl_sgemm('N', 'N', g_m, g_n, g_k, 1.0f, p.x.data(), g_k,
                                        p.w.data(), g_n, 0.0f, p.y.data(), g_n);
    if (st != dnnl_success) state.SkipWithError("dnnl_sgemm failed");
    benchmark::ClobberMemory();
  }
  set_counters(state);
  state.SetLabel("no epilogue");
}

void BM_gemm_eigen(benchmark::State& state) {
  Problem& p = problem();
  const Eigen::Map<const eigen_peer::RowMat> x(p.x.data(), g_m, g_k);
  const Eigen::Map<const eigen_peer::RowMat> w(p.w.data(), g_k, g_n);
  const Eigen::Map<const eigen_peer::RowVec> b(p.b.data(), g_n);
  Eigen::Map<eigen_peer::RowMat> y(p.y.data(), g_m, g_n);
  constexpr std::int64_t kBlock = 2048;  // Eigen runs single-threaded without OpenMP: blocks on TBB
  const std::int64_t blocks = (g_m + kBlock - 1) / kBlock;
  for (auto _ : state) {
    tbb::parallel_for(std::int64_t{0}, blocks, [&](std::int64_t blk) {
      const std::int64_t r0 = blk * kBlock;
      eigen_peer::gemm_rows(x, w, b, y, r0, std::min(kBlock, g_m - r0));
    });
    benchmark::ClobberMemory();
  }
  set_counters(state);
  state.SetLabel("bias+relu");
}

}  // namespace

BENCHMARK(BM_gemm_dype)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gemm_dype_plain)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gemm_dnnl_sgemm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gemm_eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) g_threads = std::atoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--m=", 4) == 0) g_m = std::atoll(argv[i] + 4);
    else if (std::strncmp(argv[i], "--k=", 4) == 0) g_k = std::atoll(argv[i] + 4);
    else if (std::strncmp(argv[i], "--n=", 4) == 0) g_n = std::atoll(argv[i] + 4);
    else rest.push_back(argv[i]);
  }
  if (cpu::detected_isa() != cpu::Isa::avx512) {
    std::cerr << "bench_gemm: the Eigen peer is compiled for AVX-512, which this CPU lacks\n";
    return 2;
  }
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, g_threads);
  std::cerr << "bench_gemm: threads=" << g_threads << " (oneTBB for dype/Eigen, OpenMP for dnnl_sgemm) m="
            << g_m << " k=" << g_k << " n=" << g_n << "\n";
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
