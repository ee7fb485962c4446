// dype-profile: builds, shows and checks kernel performance models.
//
//   dype-profile run --system configs/systems/local.yaml --device cpu0 --budget 180s --plot cpu.png
//   dype-profile run --system configs/systems/paper-testbed-pcie4.yaml --device gpu0   (modelled)
//   dype-profile show configs/perfmodels/generic-cpu.json --plot cpu.png
//   dype-profile validate configs/perfmodels/generic-cpu.json --graph g.mtx --device cpu0
//   dype-profile validate configs/perfmodels/nvidia-h200.json --graph g.mtx --measured g.csv  (no device)
//   dype-profile refit gpu0.json --feature-set spmm.gpu.v4 --device-model nvidia-h200 --out h200.json
//
// Figures from emulated devices are labelled "modelled", from real runs "measured". Exit status: 0,
// 2 on bad input (a file, an option's value: the message names it), 1 on other failures.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hw/kernel_launch.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "common/error.h"
#include "graph/builders.h"
#include "graph/characteristics.h"
#include "graph/mtx_reader.h"
#include "graph/snap_reader.h"
#include "perfmodel/measured_times.h"
#include "perfmodel/model_store.h"
#include "perfmodel/plot.h"
#include "perfmodel/profiler.h"
#include "apps/dype-profile/validate.h"

namespace fs = std::filesystem;
using namespace dype;
using dype::kernels::OpKind;

namespace {

double parse_duration_s(const std::string& text) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw InputError("--budget", "'" + text + "' is not a duration (e.g. 120s, 3m)");
  }
  const std::string unit = text.substr(pos);
  if (unit.empty() || unit == "s") return v;
  if (unit == "m" || unit == "min") return v * 60;
  if (unit == "h") return v * 3600;
  if (unit == "ms") return v / 1000;
  throw InputError("--budget", "unknown unit '" + unit + "' in '" + text + "' (use s, m or h)");
}

std::vector<OpKind> parse_kernels(const std::string& list) {
  std::vector<OpKind> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto k = kernels::op_kind_from_string(item);
    if (!k) throw InputError("--kernels", "unknown kernel '" + item + "'");
    out.push_back(*k);
  }
  return out;
}

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", v * 100);
  return b;
}

std::string label(const perf::ModelStore& st) {
  return st.provenance == "modelled" ? "modelled (emulated device)" : "measured";
}

perf::PlotPanel panel_for(OpKind kind, const perf::KernelModel& m) {
  perf::PlotPanel p;
  p.title = std::string(kernels::to_string(kind)) + "  held-out MAPE " + pct(m.stats.mape_holdout) +
            " (n=" + std::to_string(m.stats.holdout) + ")";
  for (const auto& s : m.samples) p.points.push_back({s.seconds, m.predict_fitted_s(s.shape), s.holdout});
  return p;
}

// --plot F.png: the points as F.plot.json beside it (kept, to re-plot), drawn by matplotlib.
void write_plot(const perf::ModelStore& st, const std::string& path) {
  std::vector<perf::PlotPanel> panels;
  for (const auto& [kind, m] : st.models) panels.push_back(panel_for(kind, m));
  const fs::path png(path), data = fs::path(path).replace_extension(".plot.json");
  perf::write_plot_data(perf::predicted_vs_measured_data(
                            "dype performance models: " + st.device_model,
                            "times " + label(st) + ", " + st.host + ", " + st.created, panels),
                        data);
  perf::run_plot_script(fs::path(DYPE_SOURCE_DIR) / "scripts" / "plot_perfmodel.py",
                        {data.string(), png.string()});
  std::printf("wrote %s (data %s)\n", png.string().c_str(), data.string().c_str());
}

// --plot names a PNG; checked before a profile's long run.
void check_plot_path(const std::string& path) {
  if (!path.empty() && fs::path(path).extension() != ".png")
    throw InputError("--plot",
                     "'" + path + "' is not a .png file (plots are PNG, drawn by matplotlib)");
}

// 1-minute load average; -1 when unknown.
double load_average() {
  double l = -1.0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1.0;
    std::fclose(f);
  }
  return l;
}

void print_store(const perf::ModelStore& st) {
  std::printf("device model : %s (%s)\n", st.device_model.c_str(), std::string(perf::to_string(st.device_class)).c_str());
  std::printf("times        : %s (basis: %s)\n", label(st).c_str(), st.time_basis.c_str());
  std::printf("profiled on  : %s at %s\n", st.host.c_str(), st.created.c_str());
  if (!st.conditions.empty()) std::printf("conditions   : %s\n", st.conditions.c_str());
  for (const auto& [kind, m] : st.models) {
    std::printf("\n[%s] feature set %s\n", std::string(kernels::to_string(kind)).c_str(),
                std::string(m.features->id).c_str());
    std::printf("  %-14s %14s   %-12s %-12s\n", "feature", "coefficient", "seen min", "seen max");
    for (int j = 0; j < m.features->size(); ++j) {
      const auto ju = static_cast<std::size_t>(j);
      std::printf("  %-14s %14.6g   %-12.4g %-12.4g\n", std::string(m.features->names[ju]).c_str(),
                  m.coefficients[ju], m.ranges[ju].min, m.ranges[ju].max);
    }
    const auto& s = m.stats;
    std::printf("  samples %d (train %d, held-out %d, rejected outliers %d)\n", s.samples, s.train,
                s.holdout, s.rejected);
    std::printf("  held-out: MAPE %s  max APE %s  R^2 %.4f   | train MAPE %s\n",
                pct(s.mape_holdout).c_str(), pct(s.max_ape_holdout).c_str(), s.r2_holdout,
                pct(s.mape_train).c_str());
    std::printf("  refinement: version %llu (accepted %llu, rejected %llu)\n",
                static_cast<unsigned long long>(m.refinement.version),
                static_cast<unsigned long long>(m.refinement.accepted),
                static_cast<unsigned long long>(m.refinement.rejected));
  }
}

std::string device_model_key(const hw::System& sys, const std::string& device) {
  const hw::DeviceConfig* dc = sys.config().find(device);
  if (dc != nullptr && dc->profile) return dc->profile->id;
  return sys.device(device).info().backend + "-" + std::string(hw::to_string(sys.device(device).kind()));
}

kernels::CsrI32 load_graph(const std::string& path) {
  kernels::EdgeList g;
  if (path.size() > 4 && path.substr(path.size() - 4) == ".mtx") {
    g = kernels::read_mtx(path, {.read_values = false});
  } else {
    g = kernels::read_snap(path).edges;
  }
  // GNN aggregation over an undirected graph: A + A^T, duplicates merged.
  return kernels::to_csr<std::int32_t>(
      g, {.duplicates = kernels::DuplicateEdges::max, .symmetrize = true});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dype-profile: fit, show and check kernel performance models"};
  app.require_subcommand(1);

  std::string system_file;  // empty: this host as dype-serve detects it (the CPU and any GPU)
  std::string device = "cpu0";
  std::string kernels_list = "spmm,gemm,window_attention";
  std::string budget = "120s";
  std::string out;
  std::string plot;
  std::uint64_t seed = 1;
  int max_points = 1000;
  int spmm_widths = 3;
  bool quiet = false;
  std::string clock = "wall";
  auto* run = app.add_subcommand("run", "profile a device and write its model store");
  run->add_option("--system", system_file, "system config (default: detect this host: cpu0 and gpu0.. as dype-serve does)");
  run->add_option("--device", device, "device name in the system")->capture_default_str();
  run->add_option("--kernels", kernels_list, "comma-separated kernels")->capture_default_str();
  run->add_option("--budget", budget, "wall-clock budget (e.g. 120s, 3m)")->capture_default_str();
  run->add_option("--out", out,
                  "output .json, or a folder for <device model>.json in it (default configs/perfmodels/<device "
                  "model>.json)");
  run->add_option("--plot", plot,
                  "also draw predicted against measured as this PNG (matplotlib; its data beside "
                  "it as .plot.json)");
  run->add_option("--seed", seed, "synthetic input seed")->capture_default_str();
  run->add_option("--max-points", max_points, "points per kernel at most")->capture_default_str();
  run->add_option("--spmm-widths", spmm_widths,
                  "feature lengths each synthetic SpMM graph is timed at (building a graph costs more than timing it)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  run->add_flag("--quiet", quiet, "no progress lines");
  run->add_option("--clock", clock,
                  "wall: wall-clock, what the planner predicts (profile on a quiet machine); "
                  "cpu: process CPU time / threads (less hurt by other jobs, but idle threads' spinning "
                  "counts). Emulated devices use modelled time.")
      ->check(CLI::IsMember({"cpu", "wall"}))
      ->capture_default_str();

  std::string model_file;
  auto* show = app.add_subcommand("show", "print a model store and its accuracy");
  show->add_option("model", model_file, "model store .json")->required();
  show->add_option(
      "--plot", plot,
      "draw predicted against measured as this PNG (matplotlib; data beside it as .plot.json)");

  std::vector<std::string> graphs;
  std::vector<std::string> measured_files;
  std::string feature_lens = "16,32,64,128,256,512";
  auto* validate = app.add_subcommand(
      "validate", "time SpMM on a real graph the fit never saw and compare with the model (or, with --measured, "
                  "compare with times measured elsewhere: no device needed)");
  std::vector<std::string> validate_models;
  int refine_requests = 5;
  validate->add_option("model", validate_models, "model store .json (several: each one's prediction side by side)")
      ->required();
  validate->add_option("--refine-requests", refine_requests,
                       "requests (one launch per N each) fed to online refinement before the second error")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  validate->add_option("--graph", graphs, "graph file (.mtx or SNAP edge list); repeat for several graphs")->required();
  validate->add_option("--measured", measured_files,
                       "CSV of SpMM times measured elsewhere for the --graph at the same position (columns "
                       "N,measured_ms): compares the model with them instead of timing on a device; give one "
                       "per --graph");
  validate->add_option("--system", system_file, "system config (default: detect this host)");
  std::string save_measured;
  validate->add_option("--save-measured", save_measured,
                       "folder: also write each graph's measured times as <graph>.csv (N,measured_ms), the CSV "
                       "--measured reads elsewhere");
  validate->add_option("--device", device, "device name in the system")->capture_default_str();
  validate->add_option("--feature-lens", feature_lens, "comma-separated N")->capture_default_str();
  validate->add_option("--clock", clock, "cpu or wall (use the clock the model was profiled with)")
      ->check(CLI::IsMember({"cpu", "wall"}))
      ->capture_default_str();

  int rounds = 3;
  validate->add_option("--rounds", rounds,
                       "time every N this many times, interleaved, and take each N's median (the machine's "
                       "load drifts between minutes)")
      ->check(CLI::Range(1, 99))
      ->capture_default_str();

  std::string refit_kernel = "spmm";
  std::string feature_set_id;
  auto* refit = app.add_subcommand(
      "refit", "fit a kernel's stored samples again with another feature set (no new timing)");
  refit->add_option("model", model_file, "model store .json")->required();
  refit->add_option("--kernel", refit_kernel, "kernel whose samples to refit")->capture_default_str();
  refit->add_option("--feature-set", feature_set_id, "feature set id (dype-profile show lists the current one)")
      ->required();
  refit->add_option("--out", out, "where to write the store (default: over the input)");
  std::string refit_device_model;
  double refit_llc_bytes = 0;
  refit->add_option("--device-model", refit_device_model,
                    "device model id to store (the device profile id the planner loads it for, e.g. nvidia-h200)");
  refit->add_option("--llc-bytes", refit_llc_bytes,
                    "the device's last-level cache in bytes, for the refitted kernel's features (a store profiled "
                    "before the device's cache size was known carries a default)")
      ->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  try {
    check_plot_path(plot);
    if (*run) {
      hw::System sys = system_file.empty() ? hw::System::detect() : hw::System::from_config(hw::load_system_config(system_file));
      hw::Device& dev = sys.device(device);
      const std::string key = device_model_key(sys, device);
      perf::ProfileOptions opt;
      opt.kernels = parse_kernels(kernels_list);
      opt.budget_s = parse_duration_s(budget);
      opt.seed = seed;
      opt.max_points = max_points;
      opt.spmm_widths_per_graph = spmm_widths;
      opt.clock = clock == "wall" ? perf::ProfileClock::wall : perf::ProfileClock::cpu_time;
      auto last = std::chrono::steady_clock::now() - std::chrono::seconds(10);
      if (!quiet) {
        opt.on_progress = [&](const perf::ProfileProgress& p) {
          const auto now = std::chrono::steady_clock::now();
          if (now - last < std::chrono::seconds(2) && p.point != p.max_points) return;
          last = now;
          std::fprintf(stderr, "[%6.1fs / %.0fs] %-16s point %3d/%d  kernel %5.1f/%5.1fs  last %.4g ms (%d reps) %s\n",
                       p.total_elapsed_s, p.total_budget_s,
                       std::string(kernels::to_string(p.kind)).c_str(), p.point, p.max_points,
                       p.kernel_elapsed_s, p.kernel_budget_s, p.sample->seconds * 1e3, p.timing->reps,
                       hw::describe(p.sample->shape).c_str());
        };
      }
      const std::string where = dev.info().time_source == hw::TimeSource::modelled ? "modelled" : "measured";
      std::fprintf(stderr, "profiling %s (%s, device model %s, times %s) for %s\n", device.c_str(),
                   dev.info().product.c_str(), key.c_str(), where.c_str(), budget.c_str());
      const unsigned hw_threads = std::max(1u, std::thread::hardware_concurrency());
      const double load0 = load_average();
      // Other work on the machine inflates measured times (and skews the cpu clock by how much the
      // kernel's idle threads spin): say so up front and in the store.
      if (where == "measured" && load0 > 0.25 * hw_threads)
        std::fprintf(stderr, "warning: load average %.2f on %u hardware threads: measured times will include "
                             "contention; profile on a quiet machine for a model of the device itself\n",
                     load0, hw_threads);
      const auto t0 = std::chrono::steady_clock::now();
      perf::ModelStore st = perf::profile_device(dev, key, opt);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (where == "measured") {
        char c[128];
        std::snprintf(c, sizeof c, "load average %.2f -> %.2f, %u hardware threads", load0, load_average(), hw_threads);
        st.conditions = c;
      }
      // --out DIR (an existing folder, or a path ending in '/'): DIR/<device model>.json, the name
      // dype-serve --perfmodels DIR looks for.
      const bool to_dir = !out.empty() && (out.back() == '/' || fs::is_directory(out));
      const fs::path path = out.empty() ? perf::ModelStore::default_path(DYPE_SOURCE_DIR, key)
                            : to_dir    ? fs::path(out) / (key + ".json")
                                        : fs::path(out);
      if (to_dir) fs::create_directories(out);
      st.save(path);
      std::printf("profiled in %.1f s (budget %s); wrote %s\n\n", took, budget.c_str(), path.string().c_str());
      print_store(st);
      if (!plot.empty()) write_plot(st, plot);
      return 0;
    }
    if (*refit) {
      perf::ModelStore st = perf::ModelStore::load(model_file);
      const auto kind = kernels::op_kind_from_string(refit_kernel);
      if (!kind) throw InputError("--kernel", "unknown kernel '" + refit_kernel + "'");
      const perf::KernelModel& old = st.at(*kind);
      const perf::FeatureSet* fs = perf::feature_set_by_id(feature_set_id);
      if (fs == nullptr) throw InputError("--feature-set", "unknown feature set '" + feature_set_id + "'");
      if (fs->kind != *kind || fs->device_class != st.device_class)
        throw InputError("--feature-set", "'" + feature_set_id + "' is not a " + refit_kernel + " set for " +
                                              std::string(perf::to_string(st.device_class)) + " devices");
      std::vector<perf::Sample> samples;
      for (const auto& x : old.samples) samples.push_back({x.shape, x.seconds});
      if (samples.empty()) throw InputError(model_file, "the " + refit_kernel + " model keeps no samples to refit");
      perf::FeatureParams params = old.params;
      if (refit_llc_bytes > 0) params.llc_bytes = refit_llc_bytes;
      const perf::FitResult fit = perf::fit_model(*fs, params, samples);
      st.models.insert_or_assign(*kind, perf::KernelModel(*fs, params, fit, samples));
      if (!refit_device_model.empty()) st.device_model = refit_device_model;
      const fs::path path = out.empty() ? fs::path(model_file) : fs::path(out);
      st.save(path);
      std::printf("refitted %s with %s; wrote %s\n\n", refit_kernel.c_str(), feature_set_id.c_str(), path.string().c_str());
      print_store(st);
      return 0;
    }
    if (*show) {
      const perf::ModelStore st = perf::ModelStore::load(model_file);
      print_store(st);
      if (!plot.empty()) write_plot(st, plot);
      return 0;
    }
    if (*validate) {
      if (!measured_files.empty()) {
        // Times measured elsewhere: no device, the stores' own device models are taken as given.
        if (measured_files.size() != graphs.size())
          throw InputError("--measured", std::to_string(measured_files.size()) + " files for " +
                                             std::to_string(graphs.size()) + " --graph (give one per graph, in order)");
        std::vector<std::vector<perf::MeasuredTime>> times;
        for (const auto& f : measured_files) times.push_back(perf::read_measured_times(f));  // all checked first
        std::vector<perf::ModelStore> stores;
        std::vector<std::string> names;
        for (const auto& file : validate_models) {
          stores.push_back(perf::ModelStore::load(file));
          const std::string fid(stores.back().at(OpKind::spmm).features->id);
          std::printf("model %s: device model %s, spmm feature set %s (times %s)\n", file.c_str(),
                      stores.back().device_model.c_str(), fid.c_str(), label(stores.back()).c_str());
          names.push_back(fid);
        }
        if (names.size() == 1) names[0] = "predicted";
        std::vector<std::vector<double>> mapes;
        for (std::size_t g = 0; g < graphs.size(); ++g) {
          std::printf("\n");
          mapes.push_back(profile_app::validate_measured(load_graph(graphs[g]), graphs[g], times[g], measured_files[g],
                                                         stores, names));
        }
        if (graphs.size() > 1) {
          std::printf("\nMAPE per graph (times measured elsewhere):\n");
          for (std::size_t g = 0; g < graphs.size(); ++g) {
            std::printf("  %-40s", graphs[g].c_str());
            for (std::size_t m = 0; m < stores.size(); ++m)
              std::printf("  %s %s", names[m].c_str(), pct(mapes[g][m]).c_str());
            std::printf("\n");
          }
        }
        return 0;
      }
      hw::System sys = system_file.empty() ? hw::System::detect() : hw::System::from_config(hw::load_system_config(system_file));
      hw::Device& dev = sys.device(device);
      const std::string key = device_model_key(sys, device);
      std::vector<perf::ModelStore> stores;
      std::vector<std::string> names;
      for (const auto& file : validate_models) {
        stores.push_back(perf::ModelStore::load(file));
        if (stores.back().device_model != key)
          throw InputError(file, "models device '" + stores.back().device_model + "' but " + device + " is a '" + key + "'");
        names.push_back(std::string(stores.back().at(OpKind::spmm).features->id));
      }
      if (names.size() == 1) names[0] = "predicted";
      profile_app::ValidateOptions vo;
      vo.feature_lens.clear();
      std::stringstream ss(feature_lens);
      std::string item;
      while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const long long n = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || end != item.c_str() + item.size() || n <= 0)
          throw InputError("--feature-lens", "'" + item + "' is not a feature length > 0");
        vo.feature_lens.push_back(n);
      }
      vo.rounds = rounds;
      vo.refine_requests = refine_requests;
      vo.clock = clock == "wall" ? perf::ProfileClock::wall : perf::ProfileClock::cpu_time;
      if (!save_measured.empty()) fs::create_directories(save_measured);
      for (std::size_t g = 0; g < graphs.size(); ++g) {
        if (g > 0) std::printf("\n");
        if (!save_measured.empty())
          vo.save_measured_csv = (fs::path(save_measured) / (fs::path(graphs[g]).stem().string() + ".csv")).string();
        profile_app::validate_graph(dev, load_graph(graphs[g]), graphs[g], stores, names, vo);
      }
      return 0;
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "dype-profile: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dype-profile: %s\n", e.what());
    return 1;
  }
  return 0;
}
