// Whether a GPU's copies run beside its kernels, as the planner's `transfers: overlap` mode assumes:
// one thread launches SpMM while another copies host -> device (then device -> host beside
// host -> device), through the same hw::Device calls the pipeline makes: how much of the shorter
// stream of work running both at once hides (100%: all of it, 0%: serialised). Measured on a real
// GPU from wall times; --system takes a system file's first GPU instead (emulated: from its
// modelled events, labelled so; the file's `transfers:` option decides).
//
//   bench_gpu_overlap [--reps 20] [--nodes 200000] [--nnz 4000000] [--features 128] [--system FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hw/emu/emu_device.h"
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


double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double sum_of(const std::vector<hw::Event>& events) {
  double s = 0.0;
  for (const auto& e : events) s += e.duration_s();
  return s;
}

// Length of the union of the events' intervals: the time at least one of them was running.
double busy_s(std::vector<hw::Event> events) {
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.start_s < b.start_s; });
  double busy = 0.0, lo = 0.0, hi = -1.0;
  for (const auto& e : events) {
    if (e.start_s > hi) {
      if (hi > lo) busy += hi - lo;
      lo = e.start_s;
      hi = e.end_s;
    } else {
      hi = std::max(hi, e.end_s);
    }
  }
  if (hi > lo) busy += hi - lo;
  return busy;
}

struct Stream {
  const char* name;
  std::function<hw::Event()> run;
};

// Runs a's and b's `reps` operations from two threads at once, then each stream alone, and prints
// how much of the shorter stream of work the concurrent run hid. Measured devices: from wall times,
// (a alone + b alone - together) / the shorter alone; an operation's event cannot say, since a copy
// waiting for the GPU to finish a kernel counts the wait as its own time. Emulated devices: from
// their modelled events (their wall time is this CPU computing), the time both were busy over the
// shorter. `restart` puts an emulated device's clocks back to 0 first, so each case starts idle.
void overlap(const char* what, const Stream& a, const Stream& b, int reps, bool measured,
             const std::function<void()>& restart) {
  restart();
  std::vector<hw::Event> ea, eb;
  auto t0 = std::chrono::steady_clock::now();
  std::thread ta([&] {
    for (int r = 0; r < reps; ++r) ea.push_back(a.run());
  });
  std::thread tb([&] {
    for (int r = 0; r < reps; ++r) eb.push_back(b.run());
  });
  ta.join();
  tb.join();
  const double together = seconds_since(t0);
  if (measured) {
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) a.run();
    const double alone_a = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) b.run();
    const double alone_b = seconds_since(t0);
    const double hidden = (alone_a + alone_b - together) / std::min(alone_a, alone_b);
    std::printf("%-22s %s alone %8.3f ms, %s alone %8.3f ms, together %8.3f ms: %5.1f%% of the shorter hidden "
                "(measured, wall time; %.2fx)\n",
                what, a.name, alone_a * 1e3, b.name, alone_b * 1e3, together * 1e3, 100.0 * hidden,
                (alone_a + alone_b) / together);
    return;
  }
  const double sa = sum_of(ea), sb = sum_of(eb);
  std::vector<hw::Event> all = ea;
  all.insert(all.end(), eb.begin(), eb.end());
  const double both = sa + sb - busy_s(all);
  std::printf("%-22s %s %8.3f ms, %s %8.3f ms, both busy %8.3f ms: %5.1f%% of the shorter hidden (modelled)\n", what,
              a.name, sa * 1e3, b.name, sb * 1e3, both * 1e3, 100.0 * both / std::min(sa, sb));
}

}  // namespace

int main(int argc, char** argv) {
  const bench::GpuBenchArgs args = bench::parse_gpu_bench_args(
      argc, argv, "bench_gpu_overlap", {.reps = 20, .nodes = 200000, .nnz = 4000000, .features = 128, .system = ""});
  const hw::System sys = args.system.empty() ? hw::System::detect()
                                              : hw::System::from_config(hw::load_system_config(args.system));
  auto gpus = sys.devices_of(hw::DeviceKind::gpu);
  if (gpus.empty()) {
    std::puts("bench_gpu_overlap: no GPU detected on this machine (the CUDA/HIP backends found none, or were not built): "
              "nothing measured");
    return 0;
  }
  hw::Device& gpu = *gpus.front();
  const char* label = gpu.info().time_source == hw::TimeSource::modelled ? "modelled" : "measured";
  std::printf("bench_gpu_overlap: %s (%s, %s), %d operations per stream, times %s\n", gpu.name().c_str(),
              gpu.info().product.c_str(), gpu.info().backend.c_str(), args.reps, label);

  const auto a = k::to_csr<std::int32_t>(k::generate_uniform(args.nodes, args.nnz, 1));
  const auto x = k::generate_features(args.nodes, args.features, 2);
  auto indptr = upload(gpu, a.indptr), indices = upload(gpu, a.indices), values = upload(gpu, a.values);
  auto bx = upload(gpu, x);
  auto by = gpu.allocate(static_cast<std::size_t>(a.rows * args.features) * sizeof(float));
  const auto launch = hw::KernelLaunch::spmm(*indptr, *indices, *values, *bx, *by, a.rows, a.cols, args.features, a.nnz());
  gpu.launch(launch);  // warm-up: the library's plan
  std::vector<double> kt;
  for (int r = 0; r < 5; ++r) kt.push_back(gpu.launch(launch).duration_s());
  std::sort(kt.begin(), kt.end());
  const double kernel_s = kt[kt.size() / 2];

  // A copy about as long as the kernel, so that either can hide the other.
  const std::size_t probe_bytes = std::size_t{64} << 20;
  std::vector<std::byte> host(probe_bytes, std::byte{1});
  auto probe = gpu.allocate(probe_bytes);
  gpu.copy_from_host(*probe, host);
  const double bw = static_cast<double>(probe_bytes) / gpu.copy_from_host(*probe, host).duration_s();
  const std::size_t bytes =
      std::clamp<std::size_t>(static_cast<std::size_t>(kernel_s * bw) & ~std::size_t{4095}, 1u << 20, probe_bytes);
  std::vector<std::byte> up(bytes, std::byte{2}), down(bytes);
  auto dst = gpu.allocate(bytes), src = gpu.allocate(bytes);
  gpu.copy_from_host(*src, up);
  std::printf("spmm (%lld nodes, %lld nnz, %lld features) %.3f ms; copies of %.1f MiB (host -> %s %.1f GB/s)\n",
              static_cast<long long>(a.rows), static_cast<long long>(a.nnz()), static_cast<long long>(args.features),
              kernel_s * 1e3, static_cast<double>(bytes) / (1 << 20), gpu.name().c_str(), bw / 1e9);

  const Stream kernels{"spmm", [&] { return gpu.launch(launch); }};
  const Stream h2d{"host->gpu", [&] { return gpu.copy_from_host(*dst, up); }};
  const Stream d2h{"gpu->host", [&] { return gpu.copy_to_host(*src, down); }};
  const auto restart = [&] {
    auto* emu = dynamic_cast<hw::EmuDevice*>(&gpu);
    if (emu == nullptr) return;
    emu->reset_clock();
    for (hw::Buffer* b : {indptr.get(), indices.get(), values.get(), bx.get(), by.get(), dst.get(), src.get()})
      b->set_ready_at_s(0.0);
  };
  const bool measured = gpu.info().time_source == hw::TimeSource::measured;
  overlap("kernel | host->gpu", kernels, h2d, args.reps, measured, restart);
  overlap("kernel | gpu->host", kernels, d2h, args.reps, measured, restart);
  overlap("host->gpu | gpu->host", h2d, d2h, args.reps, measured, restart);
  return 0;
}
