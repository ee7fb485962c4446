// Figures 6-9 of the paper as CSVs (plotted by scripts/plot_eval.py) and the comparisons the paper
// does not make: exact solver against Algorithm 1, serial against overlapping transfers.
#include <algorithm>
#include <cmath>

#include <fstream>

#include <nlohmann/json.hpp>

#include "hw/system.h"
#include "common/error.h"
#include "hw/system_config.h"
#include "sections.h"

namespace dype::eval {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The workloads of our Figure 7: the paper's text discusses GIN-S1, GIN-S3 and GIN-S4; Figure 9
// shows GCN-S1 and GCN-OA.
constexpr const char* kFigure7[] = {"GCN-S1", "GCN-OA", "GIN-S1", "GIN-S3", "GIN-S4"};
constexpr const char* kMethods[] = {"dype/perf",           "dype/balanced", "dype/energy", "static/perf",
                                    "fleetrec/perf",       "gpu-only/perf", "fpga-only/perf",
                                    "theoretical-additive/perf"};

}  // namespace

namespace {

// DiviML's bounds (lower_bound.h) and MILP-SPLIT (milp_split.h) against the exact optimum.
void bounds_and_split(const std::vector<CaseResult>& cases, Report& report) {
  report.md << "### DiviML's lower bounds and MILP-SPLIT\n\n"
            << "On each GNN case's flat cost tables as the paper ran DyPe (loaded images, planning model): the "
               "module-split bound (the chain cut into modules of at most 3 kernels where hand-offs are "
               "cheapest; latency: the sum of the modules' least latencies, perf: the largest module's least "
               "period; not valid for the energy modes) and the LP relaxation of the MILP, each as its gap below "
               "the exact optimum (OPT - bound) / OPT; MILP-SPLIT (latency only) against the exact optimum. "
               "Solve times measured (median).\n\n";
  std::vector<std::vector<std::string>> rows, csv;
  for (const char* mode : {"perf", "balanced", "energy", "latency"}) {
    int n = 0, split_n = 0, lp_n = 0, above = 0, ms_n = 0, ms_opt = 0;
    double split_sum = 0, split_worst = 0, lp_sum = 0, lp_worst = 0, ms_gap = 0;
    std::vector<double> t_exact, t_split, t_lp, t_ms, t_milp;
    for (const auto& c : cases) {
      const auto it = c.bounds.find(mode);
      if (it == c.bounds.end() || !std::isfinite(it->second.optimum)) continue;
      const BoundRow& b = it->second;
      ++n;
      t_exact.push_back(b.exact_ms);
      const auto gap = [&](double v) { return (b.optimum - v) / b.optimum; };
      if (std::isfinite(b.split)) {
        ++split_n, split_sum += gap(b.split), split_worst = std::max(split_worst, gap(b.split));
        above += b.split > b.optimum * (1 + 1e-6);
        t_split.push_back(b.split_ms);
      }
      if (std::isfinite(b.lp)) {
        ++lp_n, lp_sum += gap(b.lp), lp_worst = std::max(lp_worst, gap(b.lp));
        above += b.lp > b.optimum * (1 + 1e-6);
        t_lp.push_back(b.lp_ms);
      }
      if (std::isfinite(b.milp_split)) {
        ++ms_n;
        const double g = b.milp_split / b.optimum - 1.0;
        ms_opt += g <= 1e-6;
        ms_gap += std::max(0.0, g);
        t_ms.push_back(b.milp_split_ms);
        t_milp.push_back(b.milp_ms);
      }
      csv.push_back({c.workload.label(), c.interconnect, mode, fmt(b.optimum, 6), fmt(b.split, 6), fmt(b.lp, 6),
                     b.modules, fmt(b.milp_split, 6), fmt(b.exact_ms, 4), fmt(b.split_ms, 4), fmt(b.lp_ms, 4),
                     fmt(b.milp_split_ms, 4), fmt(b.milp_ms, 4)});
    }
    if (n == 0) continue;
    const auto mean_worst = [](int k, double sum, double worst) {
      return k ? pct(100 * sum / k) + " / " + pct(100 * worst) : std::string("not valid");
    };
    rows.push_back({mode, std::to_string(n), mean_worst(split_n, split_sum, split_worst), mean_worst(lp_n, lp_sum, lp_worst),
                    std::to_string(above), fmt(median(t_exact), 3), split_n ? fmt(median(t_split), 3) : "-",
                    fmt(median(t_lp), 3),
                    ms_n ? std::to_string(ms_opt) + "/" + std::to_string(ms_n) + (ms_opt < ms_n ? ", mean gap " + pct(100 * ms_gap / ms_n) : "") : "-",
                    ms_n ? fmt(median(t_ms), 3) : "-", ms_n ? fmt(median(t_milp), 3) : "-"});
  }
  report.table({"mode", "cases", "split bound gap (mean / worst)", "LP bound gap (mean / worst)", "bounds above OPT",
                "exact ms", "split ms", "LP ms", "MILP-SPLIT = exact", "MILP-SPLIT ms", "MILP ms"},
               rows);
  report.csv("bounds.csv",
             {"workload", "interconnect", "mode", "exact_score", "split_bound", "lp_bound", "split", "milp_split_score",
              "exact_ms", "split_ms", "lp_ms", "milp_split_ms", "milp_ms"},
             csv);
}

}  // namespace

void beyond_the_paper(const std::vector<CaseResult>& cases, Report& report) {
  report.md << "## Beyond the paper\n\n### Exact solver against Algorithm 1 and the MILP\n\n"
            << "The solvers over the same cost model (the planning model), every case and mode. A miss: Algorithm "
               "1's plan scores worse than the exact optimum (period for perf, energy otherwise; balanced also "
               "under its throughput floor). The MILP (COIN-OR CBC, after DiviML) is a second exact solver built "
               "independently of the DP, run on the GNN cases (its program grows as kernels^2 x groups^2; the "
               "transformer's 160 kernels are out of its reach). Solve times measured on this machine (median, "
               "every FPGA image assignment and layer-recurrent shape included).\n\n";
  std::vector<std::vector<std::string>> rows, csv;
  for (const char* family : {"gnn", "transformer"}) {
    for (const char* mode : kModes) {
      const std::string m = mode;
      int n = 0, misses = 0, milp_n = 0, milp_agree = 0;
      double worst = 0, sum = 0;
      std::vector<double> t_exact, t_paper, t_milp;
      for (const auto& c : cases) {
        if (c.workload.family != family) continue;
        const Figures& e = c.planned.at("dype/" + m);
        const Figures& p = c.planned.at("dype-paper-solver/" + m);
        if (!e.feasible) continue;
        ++n;
        t_exact.push_back(e.solve_s);
        t_paper.push_back(p.solve_s);
        std::string milp_plan, milp_score, milp_ms;
        if (const auto it = c.planned.find("dype-milp/" + m); it != c.planned.end()) {
          const Figures& q = it->second;
          ++milp_n;
          milp_agree += q.feasible && std::abs(q.score(m) / e.score(m) - 1.0) <= 1e-6;
          t_milp.push_back(q.solve_s);
          milp_plan = q.feasible ? q.mnemonic : "none";
          milp_score = fmt(q.score(m), 6);
          milp_ms = fmt(q.solve_s * 1e3, 4);
        }
        const double loss = p.feasible ? p.score(m) / e.score(m) - 1.0 : INFINITY;
        const bool miss = !p.feasible || loss > 1e-9;
        csv.push_back({c.workload.label(), c.interconnect, m, e.mnemonic, p.feasible ? p.mnemonic : "none",
                       fmt(e.score(m), 6), fmt(p.score(m), 6), miss ? "1" : "0", fmt(e.solve_s * 1e3, 4),
                       fmt(p.solve_s * 1e3, 4), milp_plan, milp_score, milp_ms});
        if (miss) {
          ++misses;
          worst = std::max(worst, loss);
          sum += std::isfinite(loss) ? loss : 0.0;
        }
      }
      if (n == 0) continue;
      rows.push_back({std::string(family), m, std::to_string(misses) + "/" + std::to_string(n),
                      misses ? pct(100 * sum / misses) : "-", misses ? pct(100 * worst) : "-",
                      fmt(median(t_exact) * 1e3, 3), fmt(median(t_paper) * 1e3, 3),
                      milp_n ? std::to_string(milp_agree) + "/" + std::to_string(milp_n) : "-",
                      milp_n ? fmt(median(t_milp) * 1e3, 3) : "-"});
    }
  }
  report.table({"workload", "mode", "Algorithm 1 misses", "mean loss of a miss", "worst", "exact ms (median)",
                "Algorithm 1 ms (median)", "MILP = exact", "MILP ms (median)"},
               rows);
  report.csv("solvers.csv",
             {"workload", "interconnect", "mode", "exact_plan", "algorithm1_plan", "exact_score", "algorithm1_score",
              "miss", "exact_ms", "algorithm1_ms", "milp_plan", "milp_score", "milp_ms"},
             csv);

  report.md << "### The other papers' planners\n\n"
            << "HEFT and critical-path list scheduling (seed 002), block partitioning with Kernighan-Lin refinement "
               "(seed 001) and OverSeer's least-latency DP (seed 004), adapted to pipeline stages as "
               "scheduler/solver/*.cpp says, over the same cost model (planning model) and image choice: how often "
               "each finds the exact optimum of the mode's objective, its mean gap (period for perf, energy "
               "otherwise) and its median solve time (measured). They optimise latency or load balance, not the "
               "mode's objective, and never look at energy.\n\n";
  rows.clear();
  for (const char* name : {"heft", "critical-path", "kl", "overseer"}) {
    for (const char* family : {"gnn", "transformer"}) {
      for (const char* mode : kModes) {
        const std::string m = mode;
        int n = 0, optimal = 0, none = 0;
        double gap = 0;
        std::vector<double> times;
        for (const auto& c : cases) {
          if (c.workload.family != family) continue;
          const Figures& e = c.planned.at("dype/" + m);
          const Figures& h = c.planned.at(std::string("solver-") + name + "/" + m);
          if (!e.feasible) continue;
          if (!h.feasible) {
            ++none;
            continue;
          }
          ++n;
          const double g = h.score(m) / e.score(m) - 1.0;
          optimal += g <= 1e-9;
          gap += std::max(0.0, g);
          times.push_back(h.solve_s);
        }
        if (n + none == 0) continue;
        rows.push_back({name, family, m, std::to_string(optimal) + "/" + std::to_string(n + none),
                        n ? pct(100 * gap / n) : "-", none ? std::to_string(none) : "0", fmt(median(times) * 1e3, 3)});
      }
    }
  }
  report.table({"planner", "workload", "mode", "optimum found", "mean gap", "no plan", "ms (median)"}, rows);

  bounds_and_split(cases, report);

  report.md << "### Serial against overlapping transfers\n\n"
            << "The perf-mode optimum under the ground truth with the paper's serial transfers (a stage is busy for "
               "its inbound copies, kernels and outbound copies in turn) and with transfers overlapping compute "
               "(one copy engine per direction, double-buffered stages).\n\n";
  rows.clear();
  csv.clear();
  for (const char* family : {"gnn", "transformer"}) {
    std::vector<double> gains;
    int changed = 0;
    for (const auto& c : cases) {
      if (c.workload.family != family) continue;
      const Figures& s = c.measured.at("oracle/perf");
      const Figures& o = c.measured.at("dype-overlap/perf");
      if (!s.feasible || !o.feasible) continue;
      gains.push_back(o.throughput_per_s / s.throughput_per_s);
      changed += s.mnemonic != o.mnemonic;
      csv.push_back({c.workload.label(), c.interconnect, s.mnemonic, o.mnemonic, fmt(s.throughput_per_s, 5),
                     fmt(o.throughput_per_s, 5)});
    }
    if (gains.empty()) continue;
    const auto [lo, hi] = std::minmax_element(gains.begin(), gains.end());
    double mean = 0;
    for (double g : gains) mean += g;
    rows.push_back({family, std::to_string(gains.size()), ratio(mean / gains.size()), ratio(*lo), ratio(*hi),
                    std::to_string(changed)});
  }
  report.table({"workload", "cases", "overlap / serial throughput (mean)", "min", "max", "plans that change"}, rows);
  report.csv("transfers.csv",
             {"workload", "interconnect", "serial_plan", "overlap_plan", "serial_throughput", "overlap_throughput"},
             csv);
}

std::vector<std::vector<std::string>> measured_p2p(const std::string& calibration_file) {
  std::vector<std::vector<std::string>> rows;
  if (calibration_file.empty()) return rows;
  std::ifstream f(calibration_file);
  if (!f) throw InputError("--calibration", "cannot read '" + calibration_file + "'");
  try {
    const nlohmann::json cal = nlohmann::json::parse(f);
    if (!cal.is_object() || !cal.contains("peer") || !cal["peer"].is_array() || cal["peer"].empty())
      throw InputError("--calibration", calibration_file + ": no `peer` measurements (dype-calibrate writes them "
                                                           "when it finds two or more accelerators)");
    for (const auto& pair : cal["peer"]) {
      const std::string name = "measured " + pair.at("from").get<std::string>() + "->" + pair.at("to").get<std::string>();
      if (!pair.contains("by_size") || !pair["by_size"].is_array())
        throw InputError("--calibration", calibration_file + ": peer " + name + " has no `by_size` list");
      for (const auto& m : pair["by_size"]) {
        const double direct = m.at("direct_s").get<double>(), staged = m.at("staged_s").get<double>();
        const auto bytes = m.at("bytes").get<std::uint64_t>();
        if (!(direct > 0 && staged > 0 && bytes > 0))
          throw InputError("--calibration", calibration_file + ": peer " + name + ": bytes, direct_s and staged_s must be > 0");
        rows.push_back({name, std::to_string(bytes), fmt(direct, 6), fmt(staged, 6), fmt(staged / direct, 4)});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError("--calibration", calibration_file + ": " + e.what());
  }
  return rows;
}

void figure_data(const std::vector<CaseResult>& cases, const std::vector<Interconnect>& interconnects,
                 const std::vector<std::vector<std::string>>& measured_p2p, Report& report) {
  // Figure 6: P2P against host-staged, one GPU to one FPGA, by transfer size (the topology's model),
  // and the pairs a calibration from real hardware measured.
  std::vector<std::vector<std::string>> rows = measured_p2p;
  for (const auto& ic : interconnects) {
    const hw::System sys = hw::System::from_config(hw::load_system_config(ic.system_file));
    const auto gpus = sys.devices_of(hw::DeviceKind::gpu), fpgas = sys.devices_of(hw::DeviceKind::fpga);
    if (gpus.empty() || fpgas.empty()) continue;
    const auto src = sys.indices(std::span<hw::Device* const>(gpus.data(), 1));
    const auto dst = sys.indices(std::span<hw::Device* const>(fpgas.data(), 1));
    if (!sys.topology().p2p_possible(src, dst)) continue;
    for (std::size_t bytes = 4096; bytes <= (std::size_t{1} << 30); bytes *= 4) {
      const double p2p = sys.topology().estimate(src, dst, bytes, hw::TransferPath::p2p).time_s;
      const double staged = sys.topology().estimate(src, dst, bytes, hw::TransferPath::host_staged).time_s;
      rows.push_back({ic.name, std::to_string(bytes), fmt(p2p, 6), fmt(staged, 6), fmt(staged / p2p, 4)});
    }
  }
  report.csv("fig6_p2p.csv", {"interconnect", "bytes", "p2p_s", "host_staged_s", "speedup"}, rows);

  // Figure 7: throughput and efficiency normalised to FPGA-only (perf mode).
  rows.clear();
  for (const char* w : kFigure7) {
    for (const auto& c : cases) {
      if (c.workload.label() != w) continue;
      const Figures& base = c.measured.at("fpga-only/perf");
      if (!base.feasible) continue;
      for (const char* m : kMethods) {
        const Figures& f = c.measured.at(m);
        if (!f.feasible) continue;
        rows.push_back({w, c.interconnect, m, fmt(f.throughput_per_s / base.throughput_per_s, 5),
                        fmt(f.efficiency() / base.efficiency(), 5)});
      }
    }
  }
  report.csv("fig7_normalised.csv", {"workload", "interconnect", "method", "throughput", "efficiency"}, rows);

  // Figure 8: the transformer's gain over GPU-only at window 512, by seq_len.
  rows.clear();
  for (const auto& c : cases) {
    if (c.workload.family != "transformer" || c.workload.window != 512) continue;
    for (const char* mode : kModes) {
      const Figures& d = c.measured.at(std::string("dype/") + mode);
      const Figures& g = c.measured.at(std::string("gpu-only/") + mode);
      if (!d.feasible || !g.feasible) continue;
      rows.push_back({std::to_string(c.workload.seq_len), c.interconnect, mode,
                      fmt(d.throughput_per_s / g.throughput_per_s, 5), fmt(d.efficiency() / g.efficiency(), 5)});
    }
  }
  report.csv("fig8_transformer.csv", {"seq_len", "interconnect", "mode", "throughput_gain", "efficiency_gain"}, rows);

  // Figure 9: Pareto fronts (planning model).
  rows.clear();
  for (const auto& c : cases) {
    for (const ParetoPoint& p : c.pareto)
      rows.push_back({c.workload.label(), c.interconnect, p.mnemonic, fmt(p.throughput_per_s, 5), fmt(p.energy_j, 5),
                      std::to_string(p.devices)});
  }
  report.csv("fig9_pareto.csv", {"workload", "interconnect", "plan", "throughput_per_s", "energy_j", "devices"}, rows);
}

}  // namespace dype::eval
