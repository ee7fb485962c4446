// Model management costs, measured in process on the emulated paper testbed:
//  1. memory: a ~100 MB model (2-layer GCN, 3584 wide) loaded and unloaded 50 times; resident
//     memory (RSS, /proc/self/statm, after malloc_trim as dype-serve's trimmer does) before the
//     first load, after each load and after each unload; target: back within 5% of before. (While
//     loaded the model is held twice: its weights and the emulated devices' copies in host memory.)
//  2. pause: the karate GCN reloaded 20 times while 2 threads keep requests in flight; the time
//     the switch holds admission (the service's measure), and request latencies during the
//     reloads next to a run without reloads (p50, p99, max).
//
//   ./build/release/bench/bench_model_reload [--cycles 50] [--reloads 20]
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "graph/mtx_reader.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/repository_models.h"
#include "runtime/host_memory.h"

namespace fs = std::filesystem;
using namespace dype;
using Clock = std::chrono::steady_clock;

namespace {

double rss_mb() {
  malloc_trim(0);
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6;
}

void write_big_model(const fs::path& dir, std::int64_t w) {
  fs::create_directories(dir / "big");
  std::ofstream(dir / "big" / "config.yaml") << "family: gcn\nin_features: " << w << "\nhidden: " << w << "\nlayers: 2\n";
  nlohmann::json header = nlohmann::json::object();
  std::size_t off = 0;
  for (int l = 0; l < 2; ++l) {
    const std::string c = "convs." + std::to_string(l) + ".";
    header[c + "lin.weight"] = {{"dtype", "F32"}, {"shape", {w, w}}, {"data_offsets", {off, off + w * w * 4}}};
    off += static_cast<std::size_t>(w * w * 4);
    header[c + "bias"] = {{"dtype", "F32"}, {"shape", {w}}, {"data_offsets", {off, off + w * 4}}};
    off += static_cast<std::size_t>(w * 4);
  }
  const std::string h = header.dump();
  std::ofstream out(dir / "big" / "model.safetensors", std::ios::binary);
  const std::uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h;
  const std::vector<float> chunk(1 << 18, 0.001f);
  for (std::size_t left = off; left > 0;) {
    const std::size_t k = std::min(left, chunk.size() * 4);
    out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(k));
    left -= k;
  }
}

struct Latencies {
  std::vector<double> ms;
  double pct(double p) {
    std::sort(ms.begin(), ms.end());
    return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<std::size_t>(p * static_cast<double>(ms.size())))];
  }
};

}  // namespace

int main(int argc, char** argv) {
  dype::rt::retain_freed_host_memory();  // activations reuse heap pages (runtime/host_memory.h)
  int cycles = 50, reloads = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--cycles") cycles = std::stoi(argv[i + 1]);
    else if (k == "--reloads") reloads = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_model_reload: unknown option %s (--cycles, --reloads)\n", k.c_str());
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);  // the service logs every load and unload
  const std::string source = DYPE_SOURCE_DIR;
  const fs::path dir = fs::temp_directory_path() / ("dype-bench-reload-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy(source + "/models/karate-gcn", dir / "karate-gcn", fs::copy_options::recursive);
  write_big_model(dir, 3584);

  rt::daemon::EngineServiceOptions o;
  o.system_config = source + "/configs/systems/paper-testbed-pcie4.yaml";
  o.repositories = {dir.string()};
  o.models = rt::daemon::repository_models(o.repositories, {"karate-gcn"}).models;
  rt::daemon::EngineService service(o);

  // 1. Memory over load/unload cycles.
  const double before = rss_mb();
  double max_loaded = 0.0, max_after = 0.0, last_after = 0.0;
  for (int c = 0; c < cycles; ++c) {
    service.load_model("big");
    max_loaded = std::max(max_loaded, rss_mb());
    service.unload_model("big");
    last_after = rss_mb();
    max_after = std::max(max_after, last_after);
  }
  std::printf("memory over %d load/unload cycles of a %.0f MB model (measured RSS after malloc_trim):\n", cycles,
              static_cast<double>(fs::file_size(dir / "big" / "model.safetensors")) / 1e6);
  std::printf("  before the first load %.1f MB, loaded up to %.1f MB, after unloads up to %.1f MB, after the last %.1f MB\n",
              before, max_loaded, max_after, last_after);
  const double growth = (max_after - before) / before;
  std::printf("  after-unload RSS vs before: %+.1f%% (target within 5%%: %s)\n", growth * 100.0,
              std::abs(growth) <= 0.05 ? "met" : "MISSED");

  // 2. Reload pauses while requests stream.
  const kernels::EdgeList e = kernels::read_mtx(source + "/models/karate/karate.mtx");
  std::vector<float> x(34 * 34, 0.0f);
  for (int i = 0; i < 34; ++i) x[static_cast<std::size_t>(i * 35)] = 1.0f;
  const auto graph = rt::Graph::from_edges(e, true);
  auto stream = [&](bool reloading) {
    std::atomic<bool> stop{false};
    Latencies lat;
    std::mutex mu;
    std::atomic<int> failed{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 2; ++t) {
      clients.emplace_back([&] {
        while (!stop) {
          const auto t0 = Clock::now();
          try {
            service.infer("karate-gcn", rt::Request::gnn(graph, rt::make_tensor(34, 34, x)), nullptr).get();
          } catch (...) {
            ++failed;
          }
          std::lock_guard lock(mu);
          lat.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
      });
    }
    std::vector<double> pauses;
    for (int r = 0; r < reloads; ++r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (reloading) pauses.push_back(service.load_model("karate-gcn")["switch_pause_s"].get<double>() * 1e3);
    }
    stop = true;
    for (auto& c : clients) c.join();
    std::sort(pauses.begin(), pauses.end());
    std::printf("  %-15s %6zu requests, %d failed; latency p50 %.2f ms, p99 %.2f ms, max %.2f ms", reloading ? "with reloads:" : "without:",
                lat.ms.size(), failed.load(), lat.pct(0.5), lat.pct(0.99), lat.pct(1.0));
    if (reloading) std::printf("; switch pause median %.3f ms, max %.3f ms", pauses[pauses.size() / 2], pauses.back());
    std::printf("\n");
  };
  std::printf("karate-gcn reloaded %d times under 2 streaming threads (measured; devices emulated):\n", reloads);
  stream(false);
  stream(true);
  fs::remove_all(dir);
  return 0;
}
