// The GPU backends' library kernels (cuSPARSE / cuBLAS on NVIDIA, rocSPARSE and dype's own GEMM on
// AMD) against dype's CPU kernels on the host, on the same inputs in the same process: SpMM on a
// uniform and an R-MAT graph (100k nodes, 2M nnz, 128 features) and the GCN-sized GEMM
// (100000 x 128 x 128, bias + ReLU), plus host <-> device copy bandwidth. Prints medians of the
// devices' own event times, the ratios GPU / CPU, and the largest relative difference of the
// results. Every figure is measured; without a GPU it says so and exits 0.
//
//   bench_gpu_kernels [--reps 7] [--nodes 100000] [--nnz 2000000] [--features 128] [--system FILE]
//
// --system takes the first GPU of a system file instead of detecting one (with an emulated GPU the
// GPU column is modelled, and labelled so: a dry run of the check).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "bench_gpu_common.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "graph/builders.h"
#include "graph/generators.h"

namespace {

namespace hw = dype::hw;
namespace bench = dype::bench;
using bench::upload;
namespace k = dype::kernels;


std::vector<float> download(hw::Device& d, const hw::Buffer& b) {
  std::vector<float> v(b.size_bytes() / sizeof(float));
  d.copy_to_host(b, std::as_writable_bytes(std::span<float>(v)));
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1e-30, diff = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return diff / scale;
}

struct Timed {
  double median_s = 0.0;
  std::vector<float> result;
  const char* label = "measured";
};

// Uploads the inputs once, launches `reps` times (after one warm-up), returns the median event time.
template <typename MakeLaunch>
Timed time_kernel(hw::Device& d, int reps, const MakeLaunch& make_launch, std::size_t out_bytes) {
  auto y = d.allocate(out_bytes);
  auto launch = make_launch(d, *y);
  d.launch(launch.first);
  std::vector<double> times;
  Timed t;
  for (int r = 0; r < reps; ++r) {
    hw::Event e = d.launch(launch.first);
    times.push_back(e.duration_s());
    if (e.source == hw::TimeSource::modelled) t.label = "modelled";
  }
  t.median_s = median(times);
  t.result = download(d, *y);
  return t;
}

struct SpmmInputs {
  k::CsrI32 a;
  std::vector<float> x;
};

void bench_spmm(const char* name, const SpmmInputs& in, std::int64_t f, hw::Device& cpu, hw::Device& gpu, int reps) {
  struct Held {
    hw::BufferPtr indptr, indices, values, x;
  };
  auto make = [&](hw::Device& d, hw::Buffer& y) {
    auto h = std::make_shared<Held>(Held{upload(d, in.a.indptr), upload(d, in.a.indices), upload(d, in.a.values), upload(d, in.x)});
    return std::pair{hw::KernelLaunch::spmm(*h->indptr, *h->indices, *h->values, *h->x, y, in.a.rows, in.a.cols, f, in.a.nnz()), h};
  };
  const std::size_t out_bytes = static_cast<std::size_t>(in.a.rows * f) * sizeof(float);
  Timed c = time_kernel(cpu, reps, make, out_bytes);
  Timed g = time_kernel(gpu, reps, make, out_bytes);
  const double gathered = static_cast<double>(in.a.nnz()) * static_cast<double>(f) * 4.0;
  std::printf("%-14s cpu %9.3f ms (%6.1f GB/s, %s)   %s %9.3f ms (%7.1f GB/s, %s)   gpu/cpu %6.2fx   max rel diff %.1e\n",
              name, c.median_s * 1e3, gathered / c.median_s / 1e9, c.label, gpu.name().c_str(), g.median_s * 1e3,
              gathered / g.median_s / 1e9, g.label, c.median_s / g.median_s, max_rel_diff(g.result, c.result));
}

void bench_gemm(std::int64_t m, std::int64_t kk, std::int64_t n, hw::Device& cpu, hw::Device& gpu, int reps) {
  const auto x = k::generate_features(m, kk, 21);
  const auto w = k::generate_features(kk, n, 22);
  const auto bias = k::generate_features(1, n, 23);
  struct Held {
    hw::BufferPtr x, w, bias;
  };
  auto make = [&](hw::Device& d, hw::Buffer& y) {
    auto h = std::make_shared<Held>(Held{upload(d, x), upload(d, w), upload(d, bias)});
    return std::pair{hw::KernelLaunch::gemm(*h->x, *h->w, h->bias.get(), y, m, kk, n, k::Epilogue::bias_relu), h};
  };
  const std::size_t out_bytes = static_cast<std::size_t>(m * n) * sizeof(float);
  Timed c = time_kernel(cpu, reps, make, out_bytes);
  Timed g = time_kernel(gpu, reps, make, out_bytes);
  const double flop = 2.0 * static_cast<double>(m) * static_cast<double>(kk) * static_cast<double>(n);
  std::printf("%-14s cpu %9.3f ms (%6.1f GFLOP/s, %s)  %s %9.3f ms (%7.1f GFLOP/s, %s)  gpu/cpu %6.2fx   max rel diff %.1e\n",
              "gemm+bias+relu", c.median_s * 1e3, flop / c.median_s / 1e9, c.label, gpu.name().c_str(), g.median_s * 1e3,
              flop / g.median_s / 1e9, g.label, c.median_s / g.median_s, max_rel_diff(g.result, c.result));
}

void bench_copies(hw::Device& gpu, std::size_t bytes, int reps) {
  std::vector<std::byte> host(bytes, std::byte{1});
  auto b = gpu.allocate(bytes);
  std::vector<double> up, down;
  for (int r = 0; r < reps; ++r) {
    up.push_back(gpu.copy_from_host(*b, host).duration_s());
    down.push_back(gpu.copy_to_host(*b, host).duration_s());
  }
  const char* label = gpu.info().time_source == hw::TimeSource::modelled ? "modelled" : "measured";
  std::printf("%-14s host->%s %6.1f GB/s   %s->host %6.1f GB/s   (%zu MiB, pageable host memory, %s)\n", "copies",
              gpu.name().c_str(), static_cast<double>(bytes) / median(up) / 1e9, gpu.name().c_str(),
              static_cast<double>(bytes) / median(down) / 1e9, bytes >> 20, label);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::GpuBenchArgs args = bench::parse_gpu_bench_args(argc, argv, "bench_gpu_kernels", {});
  const hw::System sys = args.system.empty() ? hw::System::detect()
                                              : hw::System::from_config(hw::load_system_config(args.system));
  auto gpus = sys.devices_of(hw::DeviceKind::gpu);
  auto cpus = sys.devices_of(hw::DeviceKind::cpu);
  if (gpus.empty()) {
    std::puts("bench_gpu_kernels: no GPU detected on this machine (the CUDA/HIP backends found none, or were not built): nothing measured");
    return 0;
  }
  if (cpus.empty()) {
    std::puts("bench_gpu_kernels: no host CPU device detected: nothing to compare against");
    return 1;
  }
  hw::Device& cpu = *cpus.front();
  hw::Device& gpu = *gpus.front();
  std::printf("bench_gpu_kernels: %s (%s, %s) vs %s (%s); medians of %d\n", gpu.name().c_str(),
              gpu.info().product.c_str(), gpu.info().backend.c_str(), cpu.name().c_str(), cpu.info().product.c_str(), args.reps);
  const std::int64_t f = args.features;
  SpmmInputs uniform{k::to_csr<std::int32_t>(k::generate_uniform(args.nodes, args.nnz, 1)),
                     k::generate_features(args.nodes, f, 2)};
  bench_spmm("spmm uniform", uniform, f, cpu, gpu, args.reps);
  SpmmInputs rmat{k::to_csr<std::int32_t>(k::generate_rmat(args.nodes, args.nnz, 3)), k::generate_features(args.nodes, f, 4)};
  bench_spmm("spmm r-mat", rmat, f, cpu, gpu, args.reps);
  bench_gemm(args.nodes, f, f, cpu, gpu, args.reps);
  bench_copies(gpu, static_cast<std::size_t>(256) << 20, args.reps);
  return 0;
}
