// CSR SpMM Y = A X: dype vs Eigen 3.4 (row-major SparseMatrix x row-major dense, same process,
// same threads), on a 100k x 100k uniform graph and an R-MAT graph with 2M nnz each, 128
// features, and the machine's DRAM read bandwidth for scale. All figures are measured.
//
//   bench_spmm [--threads=2] [--dump_dir=DIR] [google benchmark flags]
//
// --dump_dir writes each matrix (indptr/indices int32, values float32, raw little-endian) so the
// Python peers (bench/peers/spmm_torch.py) multiply exactly the same matrices.
// Counters: gathered_GBps = nnz * F * 4 bytes / time (the X rows the kernel reads), GBps for the
// DRAM read benchmark (a streaming sum over 1 GiB).

// The Eigen peer and the bandwidth probe are compiled for AVX-512 here (the rest of dype picks its
// ISA at run time), so Eigen is not held back to SSE2 by the baseline x86-64 flags; main() checks
// the CPU first.
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
#include <Eigen/Sparse>

#include <cstdint>
#include <vector>

namespace eigen_peer {

using SpMat = Eigen::SparseMatrix<float, Eigen::RowMajor, std::int32_t>;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Y[r0:r1] = A[r0:r1] X, one call per row block; blocks run on oneTBB threads (Eigen's own
// sparse product is single-threaded without OpenMP).
inline void spmm_rows(const Eigen::Map<const SpMat>& a, const Eigen::Map<const RowMat>& x,
                      Eigen::Map<RowMat>& y, std::int64_t r0, std::int64_t r1) {
  y.middleRows(r0, r1 - r0).noalias() = a.middleRows(r0, r1 - r0) * x;
}

// Sum of 64-bit words: an integer reduction the compiler vectorises (AVX-512 adds), so the loop is
// limited by memory, not by the adder.
inline std::uint64_t sum_words(const std::uint64_t* p, std::size_t count) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < count; ++i) s += p[i];
  return s;
}

}  // namespace eigen_peer
#pragma GCC pop_options

#include <benchmark/benchmark.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/spmm.h"
#include "kernels/cpu/spmm_kernels.h"
#include "graph/builders.h"
#include "graph/generators.h"
#include "graph/partition.h"

namespace {

using namespace dype::kernels;

constexpr std::int64_t kNodes = 100000;
constexpr std::int64_t kNnz = 2000000;
constexpr std::int64_t kFeatures = 128;
int g_threads = 2;

// X and Y start on a cache line, as the runtime's CPU buffers (hw/cpu/cpu_buffer.cpp) and torch's
// tensors do: a std::vector this large comes from mmap 16 bytes past a page start, and then every
// 512-byte feature row straddles 9 cache lines instead of 8.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t count) {
    const std::size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};
using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

struct Problem {
  CsrI32 a;
  AlignedFloats x;
  AlignedFloats y;
};

Problem make_problem(bool rmat) {
  // Unique edges, so both matrices hold exactly kNnz entries.
  EdgeList g = rmat ? generate_rmat(kNodes, kNnz, 1, RmatOptions{.unique = true})
                    : generate_uniform(kNodes, kNnz, 1);
  // Values of a GCN layer without the self loops (D^-1/2 A D^-1/2): realistic, not all ones.
  Problem p{gcn_norm<std::int32_t>(g, {.add_self_loops = false}), {}, {}};
  const std::vector<float> features = generate_features(kNodes, kFeatures, 2);
  p.x.assign(features.begin(), features.end());
  p.y.assign(static_cast<std::size_t>(kNodes * kFeatures), 0.0f);
  return p;
}

Problem& problem(bool rmat) {
  static Problem uniform = make_problem(false);
  static Problem power = make_problem(true);
  return rmat ? power : uniform;
}

void set_counters(benchmark::State& state, const CsrI32& a) {
  const double bytes = static_cast<double>(a.nnz()) * kFeatures * sizeof(float);
  state.counters["gathered_GBps"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["nnz"] = static_cast<double>(a.nnz());
  state.counters["threads"] = g_threads;
}

void BM_spmm_dype(benchmark::State& state) {
  Problem& p = problem(state.range(0) == 1);
  for (auto _ : state) {
    cpu::spmm(p.a.view(), p.x, kFeatures, p.y);
    benchmark::ClobberMemory();
  }
  set_counters(state, p.a);
  state.SetLabel(std::string(state.range(0) == 1 ? "rmat" : "uniform") + " isa=" +
                 std::string(cpu::to_string(cpu::active_isa())) + " panel=" +
                 std::to_string(cpu::detail::spmm_default_panel(kNodes, kFeatures)));
}

// Panel-width sweep (not part of the peer comparison): range(1) columns per pass over A.
void BM_spmm_dype_panel(benchmark::State& state) {
  Problem& p = problem(state.range(0) == 1);
  const std::int64_t panel = state.range(1);
  for (auto _ : state) {
    cpu::detail::spmm_panels(p.a.view(), std::span<const float>(p.x), kFeatures,
                             std::span<float>(p.y), panel);
    benchmark::ClobberMemory();
  }
  set_counters(state, p.a);
  state.SetLabel(std::string(state.range(0) == 1 ? "rmat" : "uniform") + " panel=" +
                 std::to_string(panel) + " (default " +
                 std::to_string(cpu::detail::spmm_default_panel(kNodes, kFeatures)) +
                 ")");
}

void BM_spmm_eigen(benchmark::State& state) {
  Problem& p = problem(state.range(0) == 1);
  const Eigen::Map<const eigen_peer::SpMat> a(p.a.rows, p.a.cols, p.a.nnz(), p.a.indptr.data(),
                                              p.a.indices.data(), p.a.values.data());
  const Eigen::Map<const eigen_peer::RowMat> x(p.x.data(), kNodes, kFeatures);
  Eigen::Map<eigen_peer::RowMat> y(p.y.data(), kNodes, kFeatures);
  // Eigen gets the same nnz-balanced row blocks as it would need to scale; 4 per thread.
  const auto bounds = partition_rows_by_nnz(p.a.view(), 4 * g_threads);
  for (auto _ : state) {
    tbb::parallel_for(std::size_t{0}, bounds.size() - 1, [&](std::size_t b) {
      eigen_peer::spmm_rows(a, x, y, bounds[b], bounds[b + 1]);
    });
    benchmark::ClobberMemory();
  }
  set_counters(state, p.a);
  state.SetLabel(state.range(0) == 1 ? "rmat" : "uniform");
}

void BM_dram_read(benchmark::State& state) {
  const std::size_t words = (std::size_t{1} << 30) / sizeof(std::uint64_t);
  std::unique_ptr<std::uint64_t[]> buf(new std::uint64_t[words]);
  tbb::parallel_for(std::size_t{0}, words, [&](std::size_t i) { buf[i] = i; });
  constexpr std::size_t kChunk = 1 << 16;
  for (auto _ : state) {
    const std::uint64_t s = tbb::parallel_reduce(
        tbb::blocked_range<std::size_t>(0, words, kChunk), std::uint64_t{0},
        [&](const tbb::blocked_range<std::size_t>& r, std::uint64_t acc) {
          return acc + eigen_peer::sum_words(buf.get() + r.begin(), r.size());
        },
        [](std::uint64_t l, std::uint64_t r) { return l + r; });
    benchmark::DoNotOptimize(s);
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(words * 8) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = g_threads;
}

void dump(const std::string& dir, const char* name, const CsrI32& a) {
  auto write = [&](const std::string& file, const void* data, std::size_t bytes) {
    std::ofstream out(dir + "/" + name + "_" + file, std::ios::binary);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!out) {
      std::cerr << "bench_spmm: cannot write " << dir << "/" << name << "_" << file << "\n";
      std::exit(2);
    }
  };
  write("indptr.i32", a.indptr.data(), a.indptr.size() * 4);
  write("indices.i32", a.indices.data(), a.indices.size() * 4);
  write("values.f32", a.values.data(), a.values.size() * 4);
  std::ofstream meta(dir + "/" + std::string(name) + "_meta.txt");
  meta << a.rows << " " << a.cols << " " << a.nnz() << " " << kFeatures << "\n";
}

}  // namespace

BENCHMARK(BM_spmm_dype)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_spmm_dype_panel)
    ->ArgsProduct({{0, 1}, {32, 48, 64, 128}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_spmm_eigen)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dram_read)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  std::string dump_dir;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      g_threads = std::atoi(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--dump_dir=", 11) == 0) {
      dump_dir = argv[i] + 11;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (cpu::detected_isa() != cpu::Isa::avx512) {
    std::cerr << "bench_spmm: the Eigen peer is compiled for AVX-512, which this CPU lacks\n";
    return 2;
  }
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, g_threads);
  std::cerr << "bench_spmm: threads=" << g_threads << " (oneTBB, dype and Eigen)\n";
  if (!dump_dir.empty()) {
    dump(dump_dir, "uniform", problem(false).a);
    dump(dump_dir, "rmat", problem(true).a);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
