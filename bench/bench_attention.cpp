// Benchmarks for the CPU sliding-window attention, row softmax and layer norm kernels (all
// figures measured on this machine's CPU).
//
//   bench_attention [google-benchmark flags]
//       Google Benchmark cases (threads fixed per case with tbb::global_control).
//   bench_attention --peer-data=DIR [--seq-len=4096 --window=512 --head-dim=64 --heads=8
//                   --threads=2 --reps=7 --seed=1]
//       Peer mode, used by bench/run_attention_peers.sh: writes deterministic random q, k, v and
//       this kernel's output to DIR/{q,k,v,out}.f32 (raw FP32 [seq_len, heads*head_dim]) and the
//       timings, thread count, scratch and peak RSS to DIR/dype.json, so bench/peers/
//       attention_torch.py can run PyTorch on the same inputs, check its outputs against ours and
//       compute the speed ratios.
#include <benchmark/benchmark.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/window_attention.h"

namespace {

namespace cpu = dype::kernels::cpu;

std::vector<float> random_vector(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Multiply-adds actually needed by the band (each (i, j) pair: head_dim for QK^T, head_dim for
// PV), times 2 flops each; the softmax's exps are not counted.
double band_flops(const cpu::WindowAttentionDims& d) {
  const std::int64_t half = std::min(d.window / 2, d.seq_len);
  double pairs = 0.0;
  for (std::int64_t i = 0; i < d.seq_len; ++i) {
    pairs += static_cast<double>(std::min(d.seq_len - 1, i + half) - std::max<std::int64_t>(0, i - half) + 1);
  }
  return pairs * 4.0 * static_cast<double>(d.head_dim) * static_cast<double>(d.heads);
}

// Process CPU time (user + sys) in seconds: on a shared, loaded machine it shows the work done
// even when the wall clock also counts time spent waiting for a core.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int allowed_threads() {
  return static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

long peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024L;  // Linux reports KiB
}

// Args: seq_len, window, head_dim, heads, threads.
void BM_WindowAttention(benchmark::State& state) {
  const cpu::WindowAttentionDims d{state.range(0), state.range(3), state.range(2), state.range(1)};
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism,
                              static_cast<std::size_t>(state.range(4)));
  const auto n = static_cast<std::size_t>(d.seq_len * d.heads * d.head_dim);
  const auto q = random_vector(n, 1);
  const auto k = random_vector(n, 2);
  const auto v = random_vector(n, 3);
  std::vector<float> out(n);
  for (auto _ : state) {
    cpu::window_attention(q, k, v, out, d);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(band_flops(d) * 1e-9 * state.iterations(),
                                                 benchmark::Counter::kIsRate);
  state.counters["threads"] = static_cast<double>(allowed_threads());
  state.counters["scratch_KiB_per_thread"] =
      static_cast<double>(cpu::window_attention_scratch_bytes(d)) / 1024.0;
  state.SetLabel(std::string("measured, isa=") + std::string(cpu::to_string(cpu::active_isa())));
}
BENCHMARK(BM_WindowAttention)
    ->ArgNames({"seq", "w", "hd", "heads", "thr"})
    ->Args({4096, 512, 64, 8, 2})
    ->Args({4096, 512, 64, 8, 1})
    ->Args({16384, 512, 64, 8, 2})
    ->Args({4096, 128, 64, 8, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: rows, cols, threads.
void BM_SoftmaxRows(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  const std::int64_t cols = state.range(1);
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism,
                              static_cast<std::size_t>(state.range(2)));
  const auto src = random_vector(static_cast<std::size_t>(rows * cols), 4);
  std::vector<float> x = src;
  for (auto _ : state) {
    cpu::softmax_rows(x, rows, cols);  // in place: softmax of a softmax is as much work
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * cols * 2 * 4);
  state.SetLabel("measured");
}
BENCHMARK(BM_SoftmaxRows)
    ->ArgNames({"rows", "cols", "thr"})
    ->Args({32768, 512, 2})
    ->Args({4096, 4096, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_LayerNormRows(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  const std::int64_t cols = state.range(1);
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism,
                              static_cast<std::size_t>(state.range(2)));
  const auto x = random_vector(static_cast<std::size_t>(rows * cols), 5);
  const auto gamma = random_vector(static_cast<std::size_t>(cols), 6);
  const auto beta = random_vector(static_cast<std::size_t>(cols), 7);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    cpu::layer_norm_rows(x, gamma, beta, y, rows, cols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * cols * 2 * 4);
  state.SetLabel("measured");
}
BENCHMARK(BM_LayerNormRows)
    ->ArgNames({"rows", "cols", "thr"})
    ->Args({4096, 512, 2})
    ->Args({32768, 512, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// ---- peer mode --------------------------------------------------------------------------------

bool flag_value(std::string_view arg, std::string_view name, std::string& value) {
  if (arg.substr(0, name.size()) != name || arg.size() <= name.size() || arg[name.size()] != '=') {
    return false;
  }
  value = std::string(arg.substr(name.size() + 1));
  return true;
}

void write_f32(const std::string& path, const std::vector<float>& x) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

int peer_mode(int argc, char** argv) {
  std::string dir;
  std::int64_t seq_len = 4096, window = 512, head_dim = 64, heads = 8, threads = 2, reps = 7;
  std::uint32_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    const std::string_view a = argv[i];
    if (flag_value(a, "--peer-data", v)) dir = v;
    else if (flag_value(a, "--seq-len", v)) seq_len = std::stoll(v);
    else if (flag_value(a, "--window", v)) window = std::stoll(v);
    else if (flag_value(a, "--head-dim", v)) head_dim = std::stoll(v);
    else if (flag_value(a, "--heads", v)) heads = std::stoll(v);
    else if (flag_value(a, "--threads", v)) threads = std::stoll(v);
    else if (flag_value(a, "--reps", v)) reps = std::stoll(v);
    else if (flag_value(a, "--seed", v)) seed = static_cast<std::uint32_t>(std::stoul(v));
    else {
      std::cerr << "bench_attention: unknown peer-mode argument '" << a << "'\n";
      return 2;
    }
  }
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(threads));
  const cpu::WindowAttentionDims d{seq_len, heads, head_dim, window};
  const auto n = static_cast<std::size_t>(seq_len * heads * head_dim);
  const auto q = random_vector(n, seed);
  const auto k = random_vector(n, seed + 1);
  const auto v = random_vector(n, seed + 2);
  std::vector<float> out(n, 0.0f);  // touched, so its pages are in the baseline RSS
  const long rss_inputs = peak_rss_bytes();

  std::vector<double> times;
  std::vector<double> cpu_times;
  cpu::window_attention(q, k, v, out, d);  // warm-up: thread pool, scratch, caches
  for (std::int64_t r = 0; r < reps; ++r) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    cpu::window_attention(q, k, v, out, d);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu_times.push_back(cpu_seconds() - c0);
  }
  std::sort(cpu_times.begin(), cpu_times.end());
  const double cpu_median = cpu_times[cpu_times.size() / 2];
  const long rss_peak = peak_rss_bytes();
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const int used_threads = allowed_threads();

  write_f32(dir + "/q.f32", q);
  write_f32(dir + "/k.f32", k);
  write_f32(dir + "/v.f32", v);
  write_f32(dir + "/out.f32", out);
  std::ofstream json(dir + "/dype.json");
  json << "{\"seq_len\": " << seq_len << ", \"window\": " << window << ", \"head_dim\": " << head_dim
       << ", \"heads\": " << heads << ", \"threads\": " << used_threads << ", \"isa\": \""
       << cpu::to_string(cpu::active_isa()) << "\", \"median_s\": " << median << ", \"cpu_median_s\": " << cpu_median
       << ", \"times_s\": [";
  for (std::size_t i = 0; i < times.size(); ++i) json << (i ? ", " : "") << times[i];
  json << "], \"gflops\": " << band_flops(d) * 1e-9 / median
       << ", \"scratch_bytes_per_thread\": " << cpu::window_attention_scratch_bytes(d)
       << ", \"rss_after_inputs_bytes\": " << rss_inputs << ", \"peak_rss_bytes\": " << rss_peak
       << "}\n";
  if (!json) throw std::runtime_error("cannot write " + dir + "/dype.json");
  std::printf(
      "dype window_attention (measured): seq_len=%lld window=%lld head_dim=%lld heads=%lld "
      "threads=%d isa=%s median=%.2f ms (%.1f GFLOP/s), CPU time %.2f ms per call, "
      "scratch/thread=%lld B peak_rss=%.1f MiB (kernel added %.1f MiB over its inputs)\n",
      static_cast<long long>(seq_len), static_cast<long long>(window),
      static_cast<long long>(head_dim), static_cast<long long>(heads), used_threads,
      std::string(cpu::to_string(cpu::active_isa())).c_str(), median * 1e3,
      band_flops(d) * 1e-9 / median, cpu_median * 1e3,
      static_cast<long long>(cpu::window_attention_scratch_bytes(d)), rss_peak / 1048576.0,
      (rss_peak - rss_inputs) / 1048576.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).substr(0, 11) == "--peer-data") return peer_mode(argc, argv);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
