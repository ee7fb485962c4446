// dype-calibrate: measures this machine and writes a system config whose figures are measured
// rather than nominal, for the scheduler's cost model.
//   * host memory copy bandwidth (single thread and all threads) and small-copy latency, across
//     transfer sizes; the calibrated CPU device model's memory bandwidth is the all-thread copy
//     traffic (read + write bytes per second);
//   * CPU package power from Linux RAPL (/sys/class/powercap/intel-rapl:*/energy_uj, wrap-around
//     via max_energy_range_uj) at idle and while copying, when readable;
//   * on every real accelerator the compiled backends detect (cuda, xrt): host<->device bandwidth
//     and latency across sizes, device<->device P2P vs host-staged, kernel launch overhead, and
//     idle/execute power where the device reports energy.
//   * with --peer HOST:PORT, instead: the path to another host's stage server (dype-serve
//     --stage-server) over UCX across sizes, fitted as the NIC figures of a system file's hosts entry
//     (runtime/remote/path_probe.h).
// Every figure it prints and writes is measured. Usage:
//   dype-calibrate --out configs/calibrated   (writes devices/calibrated-cpu.yaml, systems/calibrated.yaml)
//   dype-calibrate --peer 10.0.0.7:7102 --stage-token-file stage.token [--peer-name b] [--json out.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>
#include <yaml-cpp/yaml.h>

#include "hw/device.h"
#include "hw/device_profile.h"
#include "hw/registry.h"
#include "hw/system_file.h"
#include "common/error.h"
#ifdef DYPE_HAVE_REMOTE
#include "runtime/daemon/admin/admin.h"
#include "runtime/remote/path_probe.h"
#endif

namespace fs = std::filesystem;
using namespace dype;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best of `reps` timings of fn (the least disturbed run on a shared machine).
template <typename F>
double best_time_s(int reps, F&& fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

// ---- RAPL ---------------------------------------------------------------------------------------
struct RaplDomain {
  fs::path energy_file;
  double max_range_uj = 0;
  std::string name;
};

std::vector<RaplDomain> find_rapl(std::string* note) {
  std::vector<RaplDomain> out;
  const fs::path base = "/sys/class/powercap";
  std::error_code ec;
  if (!fs::exists(base, ec)) {
    *note = "no /sys/class/powercap (no RAPL driver, or a VM/container without it): CPU power stays nominal";
    return out;
  }
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const std::string n = e.path().filename().string();
    // Top-level packages only (intel-rapl:0), not sub-zones (intel-rapl:0:0), to avoid double counting.
    if (n.rfind("intel-rapl:", 0) != 0 || std::count(n.begin(), n.end(), ':') != 1) continue;
    RaplDomain d;
    d.energy_file = e.path() / "energy_uj";
    std::ifstream r(e.path() / "max_energy_range_uj");
    r >> d.max_range_uj;
    std::ifstream nm(e.path() / "name");
    nm >> d.name;
    std::ifstream test(d.energy_file);
    double v = 0;
    if (!(test >> v)) {
      *note = d.energy_file.string() + " is not readable (needs root on kernels >= 5.10): CPU power stays nominal";
      continue;
    }
    out.push_back(d);
  }
  if (out.empty() && note->empty()) *note = "no intel-rapl package domains under /sys/class/powercap: CPU power stays nominal";
  return out;
}

std::vector<double> read_rapl(const std::vector<RaplDomain>& ds) {
  std::vector<double> v;
  for (const auto& d : ds) {
    std::ifstream f(d.energy_file);
    double x = 0;
    f >> x;
    v.push_back(x);
  }
  return v;
}

// Joules between two readings; a counter that wrapped past max_energy_range_uj adds the range.
double rapl_delta_j(const std::vector<RaplDomain>& ds, const std::vector<double>& a, const std::vector<double>& b) {
  double uj = 0;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    double d = b[i] - a[i];
    if (d < 0) d += ds[i].max_range_uj;
    uj += d;
  }
  return uj * 1e-6;
}

// ---- host memory ----------------------------------------------------------------------------------
struct CopyPoint {
  std::size_t bytes;
  double single_s, parallel_s;
};

std::vector<CopyPoint> host_copy(std::size_t max_bytes, int reps) {
  std::vector<std::byte> a(max_bytes, std::byte{1}), b(max_bytes, std::byte{2});
  std::vector<CopyPoint> out;
  for (std::size_t n = 4096; n <= max_bytes; n *= 4) {
    CopyPoint p{n, 0, 0};
    p.single_s = best_time_s(reps, [&] { std::memcpy(b.data(), a.data(), n); });
    const std::size_t grain = std::max<std::size_t>(n / (4 * std::max(1u, std::thread::hardware_concurrency())), 64 << 10);
    p.parallel_s = best_time_s(reps, [&] {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, grain), [&](const tbb::blocked_range<std::size_t>& r) {
        std::memcpy(b.data() + r.begin(), a.data() + r.begin(), r.size());
      });
    });
    out.push_back(p);
  }
  return out;
}

// ---- accelerators ---------------------------------------------------------------------------------
nlohmann::json measure_device(hw::Device& dev, std::size_t max_bytes, int reps) {
  nlohmann::json j;
  j["name"] = dev.name();
  j["model"] = dev.info().product;
  j["backend"] = dev.info().backend;
  std::vector<std::byte> host(max_bytes, std::byte{3});
  auto buf = dev.allocate(max_bytes);
  for (std::size_t n = 4096; n <= max_bytes; n *= 4) {
    double up = 1e30, down = 1e30;
    for (int r = 0; r < reps; ++r) {
      up = std::min(up, dev.copy_from_host(*buf, std::span<const std::byte>(host.data(), n)).duration_s());
      down = std::min(down, dev.copy_to_host(*buf, std::span<std::byte>(host.data(), n)).duration_s());
    }
    j["h2d"].push_back({{"bytes", n}, {"seconds", up}, {"gb_per_s", n / up * 1e-9}});
    j["d2h"].push_back({{"bytes", n}, {"seconds", down}, {"gb_per_s", n / down * 1e-9}});
  }
  if (dev.supports(kernels::OpKind::gemm)) {
    // Launch overhead: a 1x1x1 GEMM is all overhead.
    auto x = dev.allocate(4), w = dev.allocate(4), y = dev.allocate(4);
    double best = 1e30;
    for (int r = 0; r < 50; ++r) best = std::min(best, dev.launch(hw::KernelLaunch::gemm(*x, *w, nullptr, *y, 1, 1, 1)).duration_s());
    j["launch_overhead_s"] = best;
    // Idle vs execute power, when the device reports energy.
    if (auto e0 = dev.energy()) {
      const auto t0 = Clock::now();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const double idle_s = seconds_since(t0);
      const auto e1 = dev.energy();
      const std::int64_t n = 2048;
      auto a = dev.allocate(n * n * 4), b = dev.allocate(n * n * 4), c = dev.allocate(n * n * 4);
      const auto t1 = Clock::now();
      while (seconds_since(t1) < 1.0) dev.launch(hw::KernelLaunch::gemm(*a, *b, nullptr, *c, n, n, n));
      const double busy_s = seconds_since(t1);
      const auto e2 = dev.energy();
      if (e1 && e2) {
        j["idle_w"] = (e1->total_j() - e0->total_j()) / idle_s;
        j["execute_w"] = (e2->total_j() - e1->total_j()) / busy_s;
      }
    } else {
      j["power_note"] = "the device reports no energy";
    }
  }
  return j;
}

// A detected accelerator's profile with what measure_device found: the slower direction's copy rate
// at the largest size as the link's measured bandwidth, the smallest copy's time as its latency,
// idle and busy power from the device's energy counter, GEMM launch overhead.
hw::DeviceProfile calibrated_profile(hw::DeviceProfile p, const nlohmann::json& j) {
  const double up = j["h2d"].back()["gb_per_s"].get<double>(), down = j["d2h"].back()["gb_per_s"].get<double>();
  p.link.measured_bytes_per_s = std::min(up, down) * 1e9;
  p.link.latency_s = std::min(j["h2d"].front()["seconds"].get<double>(), j["d2h"].front()["seconds"].get<double>());
  if (j.contains("idle_w") && j.contains("execute_w")) {
    p.power.idle_w = j["idle_w"].get<double>();
    p.power.execute_w = std::max(j["execute_w"].get<double>(), p.power.idle_w);
    p.power.transfer_w = p.power.idle_w + 0.1 * (p.power.execute_w - p.power.idle_w);
  }
  if (j.contains("launch_overhead_s") && p.ops.count(kernels::OpKind::gemm))
    p.ops[kernels::OpKind::gemm].launch_overhead_s = j["launch_overhead_s"].get<double>();
  return p;
}

std::string calibrated_note(const hw::DeviceProfile& p, const nlohmann::json& j, const std::string& name) {
  std::string note = name + " (" + p.product + "), profile from " + std::string(hw::to_string(p.source)) +
                     "; measured here: link bandwidth and latency, GEMM launch overhead";
  note += j.contains("idle_w") ? ", idle and busy power.\n" : "; power nominal (the device reports no energy).\n";
  if (!p.estimated.empty()) note += "# Estimated: " + p.estimated + "\n";
  return note;
}

// P2P against host-staged from a to b at sizes 4 KiB, x4, ... up to max_bytes (dype-eval's Figure 6
// plots `by_size`); the top-level figures are the largest size's.
nlohmann::json measure_pair(hw::Device& a, hw::Device& b, std::size_t max_bytes, int reps) {
  nlohmann::json j{{"from", a.name()}, {"to", b.name()}, {"by_size", nlohmann::json::array()}};
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 4096; bytes < max_bytes; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(max_bytes);
  for (const std::size_t bytes : sizes) {
    auto src = a.allocate(bytes), dst = b.allocate(bytes);
    double p2p = 1e30, staged = 1e30;
    for (int r = 0; r < reps; ++r) {
      p2p = std::min(p2p, a.copy_to_peer(*src, *dst).duration_s());
      staged = std::min(staged, a.hw::Device::copy_to_peer(*src, *dst).duration_s());  // host-staged path
    }
    j["by_size"].push_back({{"bytes", bytes}, {"direct_s", p2p}, {"staged_s", staged}});
    j["bytes"] = bytes;
    j["direct_gb_per_s"] = bytes / p2p * 1e-9;
    j["staged_gb_per_s"] = bytes / staged * 1e-9;
  }
  return j;
}

#ifdef DYPE_HAVE_REMOTE
// --peer: the path to a stage server, as a hosts entry (measured).
int calibrate_peer(const std::string& peer, const std::string& name, const std::string& token_file, int reps,
                   std::size_t max_mib, const std::string& json_path) {
  const std::string token = token_file.empty() ? "" : rt::daemon::read_token_file(token_file, "stage");
  std::vector<std::size_t> sizes;
  for (std::size_t b = 64; b <= (max_mib << 20); b *= 4) sizes.push_back(b);
  const auto fit = rt::remote::probe_path(rt::remote::UcxContext::create(), rt::remote::parse_host_port(peer), token,
                                          sizes, reps);
  std::printf("path to %s (host '%s') over UCX, send -> 1-byte acknowledgement (measured, median of %d):\n", peer.c_str(),
              fit.where.c_str(), reps);
  std::printf("%12s %12s %12s %12s\n", "bytes", "median_us", "min_us", "GB/s");
  nlohmann::json j = {{"peer", peer}, {"host", fit.where}, {"reps", reps}};
  for (const auto& p : fit.points) {
    std::printf("%12zu %12.1f %12.1f %12.3f\n", p.bytes, p.median_s * 1e6, p.min_s * 1e6, p.bytes / p.median_s * 1e-9);
    j["points"].push_back({{"bytes", p.bytes}, {"median_s", p.median_s}, {"min_s", p.min_s}});
  }
  const double gbit = fit.bytes_per_s * 8 / 1e9, lat_us = fit.latency_per_end_s * 1e6;
  std::printf("fit: t = %.1f us + bytes / %.3f GB/s  ->  nic_gbit_per_s %.2f, nic_latency_us %.1f (each end; "
              "the path end to end, measured)\n", fit.round_trip_s * 1e6, fit.bytes_per_s * 1e-9, gbit, lat_us);
  std::printf("hosts entry:\n  - {name: %s, address: \"%s\", nic_gbit_per_s: %.2f, nic_latency_us: %.1f}\n", name.c_str(),
              peer.c_str(), gbit, lat_us);
  j["round_trip_s"] = fit.round_trip_s;
  j["nic_gbit_per_s"] = gbit;
  j["nic_latency_us"] = lat_us;
  if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dype-calibrate: measure this machine and write a calibrated system config"};
  std::string out_dir = "calibrated";
  std::string base_model = hw::default_config_dir() + "/devices/generic-cpu.yaml";
#ifdef DYPE_SOURCE_DIR
  // Run from outside the repository: fall back to the source tree's configs.
  if (!fs::exists(base_model)) base_model = std::string(DYPE_SOURCE_DIR) + "/configs/devices/generic-cpu.yaml";
#endif
  std::size_t max_mib = 256;
  int reps = 5;
  double power_window_s = 1.0;
  app.add_option("--out", out_dir, "output folder (gets devices/ and systems/)");
  app.add_option("--base-model", base_model, "CPU device model to calibrate")->check(CLI::ExistingFile);
  app.add_option("--max-mib", max_mib, "largest transfer size, MiB")->check(CLI::Range(1, 4096));
  app.add_option("--reps", reps, "repetitions per point (best is kept)")->check(CLI::Range(1, 100));
  app.add_option("--power-window", power_window_s, "seconds per RAPL power reading")->check(CLI::Range(0.1, 60.0));
  std::string peer, peer_name = "peer", stage_token_file, json_path;
  app.add_option("--peer", peer,
                 "HOST:PORT of another host's stage server (dype-serve --stage-server): measure the path to it over UCX "
                 "and print its hosts entry (NIC bandwidth and latency) instead of calibrating this machine");
  app.add_option("--peer-name", peer_name, "with --peer: the host's name in the printed entry");
  app.add_option("--stage-token-file", stage_token_file, "with --peer: the deployment's stage token");
  app.add_option("--json", json_path, "with --peer: also write the points and the fit here");
  // --peer measures 64 B .. min(--max-mib, 16) MiB, at least 20 repetitions per size.
  CLI11_PARSE(app, argc, argv);
  if (!peer.empty()) {
#ifdef DYPE_HAVE_REMOTE
    try {
      return calibrate_peer(peer, peer_name, stage_token_file, std::max(reps, 20), std::min<std::size_t>(max_mib, 16), json_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dype-calibrate: %s\n", e.what());
      return 1;
    }
#else
    std::fprintf(stderr, "dype-calibrate: --peer: this build has no UCX (sanitizer builds leave it out)\n");
    return 2;
#endif
  }

  try {
    const std::size_t max_bytes = max_mib << 20;
    nlohmann::json report;
    // 1. Host memory.
    std::printf("host memory copy (measured, best of %d):\n%12s %14s %14s\n", reps, "bytes", "1 thread GB/s", "all GB/s");
    const auto copies = host_copy(max_bytes, reps);
    double best_parallel = 0;
    for (const auto& p : copies) {
      const double s = p.bytes / p.single_s * 1e-9, m = p.bytes / p.parallel_s * 1e-9;
      std::printf("%12zu %14.2f %14.2f\n", p.bytes, s, m);
      report["host_copy"].push_back({{"bytes", p.bytes}, {"single_thread_s", p.single_s}, {"all_threads_s", p.parallel_s}});
      if (p.bytes >= (8u << 20)) best_parallel = std::max(best_parallel, m);  // beyond the caches
    }
    if (best_parallel == 0) best_parallel = copies.back().bytes / copies.back().parallel_s * 1e-9;
    const double latency_s = copies.front().single_s;
    std::printf("small-copy latency (4 KiB): %.2f us (measured)\n", latency_s * 1e6);
    // A copy reads and writes every byte: memory traffic is twice the copy rate.
    const double mem_bw_gbps = 2.0 * best_parallel;
    report["host_memory_bandwidth_gbps"] = mem_bw_gbps;

    // 2. RAPL.
    std::string rapl_note;
    const auto rapl = find_rapl(&rapl_note);
    std::optional<double> idle_w, execute_w;
    if (!rapl.empty()) {
      auto r0 = read_rapl(rapl);
      auto t0 = Clock::now();
      std::this_thread::sleep_for(std::chrono::duration<double>(power_window_s));
      auto r1 = read_rapl(rapl);
      idle_w = rapl_delta_j(rapl, r0, r1) / seconds_since(t0);
      std::vector<std::byte> a(max_bytes), b(max_bytes);
      r0 = read_rapl(rapl);
      t0 = Clock::now();
      while (seconds_since(t0) < power_window_s) {
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, max_bytes, 1 << 20), [&](const auto& r) {
          std::memcpy(b.data() + r.begin(), a.data() + r.begin(), r.size());
        });
      }
      r1 = read_rapl(rapl);
      execute_w = rapl_delta_j(rapl, r0, r1) / seconds_since(t0);
      std::printf("CPU package power (RAPL, measured): idle %.1f W, copying %.1f W\n", *idle_w, *execute_w);
      report["cpu_idle_w"] = *idle_w;
      report["cpu_execute_w"] = *execute_w;
    } else {
      std::printf("CPU power: not measured: %s\n", rapl_note.c_str());
      report["cpu_power_note"] = rapl_note;
    }

    // 3. Accelerators the compiled backends detect.
    std::vector<hw::DeviceConfig> accel_cfgs;
    std::vector<hw::DevicePtr> accels;
    hw::SystemConfig detected;
    for (const auto& b : hw::backends()) {
      if (b.name == "cpu" || b.name == "emu" || !b.detect) continue;
      for (auto& dc : b.detect()) {
        try {
          accels.push_back(b.create(dc, detected));
          accel_cfgs.push_back(dc);
        } catch (const std::exception& e) {
          std::printf("%s (%s): not usable: %s\n", dc.name.c_str(), b.name.c_str(), e.what());
        }
      }
    }
    if (accels.empty()) std::printf("accelerators: none detected by the compiled backends (cuda, xrt)\n");
    std::vector<nlohmann::json> accel_reports;
    for (auto& d : accels) {
      auto j = measure_device(*d, max_bytes, reps);
      std::printf("%s: h2d %.2f GB/s, d2h %.2f GB/s at %zu MiB (measured)\n", d->name().c_str(),
                  j["h2d"].back()["gb_per_s"].get<double>(), j["d2h"].back()["gb_per_s"].get<double>(), max_mib);
      report["devices"].push_back(j);
      accel_reports.push_back(j);
    }
    for (std::size_t i = 0; i < accels.size(); ++i)
      for (std::size_t k = 0; k < accels.size(); ++k)
        if (i != k) report["peer"].push_back(measure_pair(*accels[i], *accels[k], max_bytes, reps));

    // 4. Write the calibrated device model and system config, then load them back as a check.
    fs::create_directories(fs::path(out_dir) / "devices");
    fs::create_directories(fs::path(out_dir) / "systems");
    YAML::Node model = YAML::LoadFile(base_model);
    model["id"] = "calibrated-" + model["id"].as<std::string>();
    model["model"] = model["model"].as<std::string>() + " (calibrated)";
    model["memory"]["bandwidth_gbps"] = mem_bw_gbps;
    if (idle_w && execute_w) {
      model["power"]["idle_w"] = *idle_w;
      model["power"]["execute_w"] = std::max(*execute_w, *idle_w);
      model["power"]["transfer_w"] = std::max(*execute_w, *idle_w);
    }
    const fs::path model_file = fs::path(out_dir) / "devices" / "calibrated-cpu.yaml";
    {
      std::ofstream f(model_file);
      f << "# Written by dype-calibrate: memory bandwidth measured (all-thread copy traffic)";
      f << (idle_w ? ", power measured (RAPL)" : ", power nominal (" + rapl_note + ")") << ".\n";
      f << model << "\n";
    }
    YAML::Node sys;
    sys["system"]["name"] = "calibrated";
    sys["system"]["description"] = "measured by dype-calibrate";
    sys["topology"]["sockets"] = 1;
    YAML::Node cpu;
    cpu["name"] = "cpu0";
    cpu["backend"] = "cpu";
    cpu["model"] = "devices/calibrated-cpu.yaml";
    cpu["schedulable"] = true;
    sys["devices"].push_back(cpu);
    for (std::size_t i = 0; i < accel_cfgs.size(); ++i) {
      const hw::DeviceConfig& dc = accel_cfgs[i];
      YAML::Node d;
      d["name"] = dc.name;
      d["backend"] = dc.backend;
      d["ordinal"] = dc.ordinal;
      if (dc.profile) {
        // The detected profile under its product id (so --perfmodels finds <id>.json for it), with
        // what was measured here in place of nominal figures.
        const fs::path file = fs::path(out_dir) / "devices" / (dc.profile->id + ".yaml");
        std::ofstream(file) << "# Written by dype-calibrate: " << calibrated_note(*dc.profile, accel_reports[i], dc.name)
                            << hw::device_profile_yaml(calibrated_profile(*dc.profile, accel_reports[i]));
        d["model"] = "devices/" + dc.profile->id + ".yaml";
        std::printf("wrote %s (%s: profile %s, link and power measured where reported)\n", file.c_str(),
                    dc.name.c_str(), dc.profile->id.c_str());
      } else if (!dc.no_profile_why.empty()) {
        std::printf("%s: no profile written: %s\n", dc.name.c_str(), dc.no_profile_why.c_str());
      }
      sys["devices"].push_back(d);
    }
    const fs::path sys_file = fs::path(out_dir) / "systems" / "calibrated.yaml";
    {
      std::ofstream f(sys_file);
      f << "# Written by dype-calibrate (measured figures; see devices/calibrated-cpu.yaml).\n" << sys << "\n";
    }
    const auto loaded = hw::load_system_config(sys_file.string());
    std::printf("wrote %s and %s (%zu devices; loads as a system config)\n", model_file.c_str(), sys_file.c_str(),
                loaded.devices.size());
    std::ofstream(fs::path(out_dir) / "calibration.json") << report.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dype-calibrate: %s\n", e.what());
    return 1;
  }
  return 0;
}
