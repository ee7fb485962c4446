// dype-eval: reproduces the DyPe paper's evaluation (Tables III-V, Figures 6-9) on the emulated
// paper testbeds and prints each of our figures beside the paper's, plus what the paper does not
// show (exact solver against Algorithm 1, serial against overlapping transfers).
//
//   dype-eval --out eval-report                       # everything, a few minutes on 2 cores
//   dype-eval --out r --systems pcie4 --workloads gnn  # one interconnect, GNNs only
//
// Writes DIR/report.md, one CSV per table and figure, and the figures as PNG, drawn from those
// CSVs by scripts/plot_eval.py (matplotlib). Every figure is modelled: plans are made as the daemon
// makes them and priced by the emulated devices' own timing models. Exit status: 0 report written,
// 2 bad input (unknown system or workload, missing or malformed paper table file, unwritable
// folder), 4 the plots could not be drawn.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "eval_cases.h"
#include "hw/system_config.h"
#include "perfmodel/plot.h"
#include "sections.h"

namespace {

using namespace dype;
using namespace dype::eval;

struct Options {
  std::string out, paper, config_dir, perfmodels, calibration, systems = "pcie4,pcie5,cxl3", workloads = "gnn,transformer";
  bool no_plots = false;
  double reload_horizon = 1000;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<Interconnect> interconnects(const Options& o) {
  const std::vector<Interconnect> known = {{"pcie4", "PCIe 4.0", ""}, {"pcie5", "PCIe 5.0", ""}, {"cxl3", "CXL 3.0", ""}};
  std::vector<Interconnect> out;
  for (const auto& name : split(o.systems)) {
    auto it = std::find_if(known.begin(), known.end(), [&](const Interconnect& i) { return i.name == name; });
    if (it == known.end()) throw InputError("--systems", "unknown system '" + name + "' (pcie4, pcie5, cxl3)");
    Interconnect ic = *it;
    ic.system_file = o.config_dir + "/systems/paper-testbed-" + name + ".yaml";
    if (!std::filesystem::is_regular_file(ic.system_file))
      throw InputError("--systems", "no system file for '" + name + "' at " + ic.system_file);
    out.push_back(ic);
  }
  if (out.empty()) throw InputError("--systems", "name at least one of pcie4, pcie5, cxl3");
  return out;
}

std::vector<CaseRequest> cases(const Options& o, const std::vector<Interconnect>& ics) {
  bool gnn = false, transformer = false;
  for (const auto& w : split(o.workloads)) {
    if (w == "gnn") gnn = true;
    else if (w == "transformer") transformer = true;
    else throw InputError("--workloads", "unknown workload '" + w + "' (gnn, transformer)");
  }
  if (!gnn && !transformer) throw InputError("--workloads", "name at least one of gnn, transformer");
  std::vector<CaseRequest> out;
  for (const auto& ic : ics) {
    const bool first = &ic == &ics.front();  // Figure 9's fronts on the first interconnect
    if (gnn) {
      for (const char* model : {"GCN", "GIN"})
        for (const char* ds : {"OA", "OP", "S1", "S2", "S3", "S4"}) {
          Workload w{"gnn", model, ds};
          out.push_back({w, ic, first && (w.label() == "GCN-S1" || w.label() == "GCN-OA")});
        }
    }
    if (transformer) {
      // Section IV-B: seq_len 1024-16384, window 512-4096, window <= seq_len.
      for (std::int64_t seq : {1024, 2048, 4096, 8192, 12288, 16384})
        for (std::int64_t win : {512, 1024, 2048, 4096}) {
          if (win > seq) continue;
          const bool front = first && ((seq == 2048 && win == 512) || (seq == 12288 && win == 2048));
          out.push_back({Workload{"transformer", "transformer", "", seq, win}, ic, front});
        }
    }
  }
  return out;
}

int run(Options o) {
  const auto t0 = std::chrono::steady_clock::now();
  const PaperTables paper = load_paper_tables(o.paper);
  const auto measured = measured_p2p(o.calibration);
  const std::vector<Interconnect> ics = interconnects(o);
  const std::vector<CaseRequest> requests = cases(o, ics);
  Report report(o.out);  // checks the folder before the long part
  std::printf("dype-eval: %zu cases (%s; %s), planning ...\n", requests.size(), o.systems.c_str(), o.workloads.c_str());
  std::fflush(stdout);
  const EvalOptions eval_options{.config_dir = o.config_dir, .perfmodels_dir = o.perfmodels, .reload_horizon = o.reload_horizon};
  const std::vector<CaseResult> results = run_cases(requests, eval_options);
  const double planning_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  report.md << "# dype-eval: the DyPe paper's evaluation, reproduced\n\n"
            << "Everything here is **modelled**: the emulated paper testbeds (2 x MI210, 3 x U280; " << o.systems
            << "), plans made as `dype-serve` makes them (RuntimeCostModel over the fitted performance models in `"
            << o.perfmodels << "`, every FPGA image assignment), priced by the ground truth: the emulated devices' "
            << "own timing models. Paper figures from `" << paper.file << "` (" << paper.source << "). "
            << requests.size() << " cases planned in " << fmt(planning_s, 3) << " s.\n\n";
  Headline h;
  const bool have_gnn =
      std::any_of(results.begin(), results.end(), [](const CaseResult& c) { return c.workload.family == "gnn"; });
  if (have_gnn) table5(results, paper, report, h);
  table4(results, paper, report, h);
  if (have_gnn) table3(results, paper, report, h);
  beyond_the_paper(results, report);
  drift_stream(results, ics, eval_options, report);
  figure_data(results, ics, measured, report);
  report.md << "## Figures\n\nFigure 6 `fig6_p2p.*` (P2P against host-staged, modelled from the "
               "topology; series named `measured` come from a calibration of real hardware, "
               "`--calibration`), Figure 7 `fig7_normalised.*`, Figure 8 `fig8_transformer.*`, "
               "Figure 9 `fig9_pareto.*`: PNG (matplotlib), their CSVs beside them.\n\n"
               "![Figure 7](fig7_normalised.png)\n\n";
  report.write_markdown();

  int rc = 0;
  if (!o.no_plots) {
    try {
      perf::run_plot_script(std::filesystem::path(DYPE_SOURCE_DIR) / "scripts" / "plot_eval.py",
                            {o.out});
    } catch (const Error& e) {
      std::fprintf(stderr,
                   "dype-eval: the plots could not be drawn: %s; the report and CSVs are written\n",
                   e.what());
      rc = 4;
    }
  }
  std::printf("dype-eval: report in %s/report.md (%.1f s)\n", o.out.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (h.table5_cases)
    std::printf("  Table V: %d of %d plans match the paper's\n", h.table5_match, h.table5_cases);
  if (h.t3_cases)
    std::printf("  Table III: sub-optimal %d/%d (perf), %d/%d (energy); paper 3/42, 4/42\n", h.t3_perf_suboptimal,
                h.t3_cases, h.t3_energy_suboptimal, h.t3_cases);
  if (h.gnn_perf_over_static > 0)
    std::printf("  Table IV GNN perf: %.2fx static (paper 2.24x), %.2fx GPU-only (paper 1.68x)\n", h.gnn_perf_over_static,
                h.gnn_perf_over_gpu);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  // configs/ as every tool finds it, but one that has the paper's tables (a working directory's
  // own configs/ may hold only systems).
  o.config_dir = dype::hw::default_config_dir();
  if (!std::filesystem::exists(o.config_dir + "/paper")) o.config_dir = std::string(DYPE_SOURCE_DIR) + "/configs";
  CLI::App app{"dype-eval: the DyPe paper's evaluation on the emulated testbeds, beside the paper's figures"};
  app.add_option("--out", o.out, "report folder (created)")->required();
  app.add_option("--paper", o.paper, "the paper's tables (default configs/paper/dype-tables.yaml)");
  app.add_option("--systems", o.systems, "interconnects, comma-separated: pcie4, pcie5, cxl3")->capture_default_str();
  app.add_option("--workloads", o.workloads, "gnn, transformer or both")->capture_default_str();
  app.add_option("--perfmodels", o.perfmodels, "fitted performance models the planner uses (default configs/perfmodels)");
  app.add_option("--reload-horizon", o.reload_horizon, "requests an FPGA image reload is amortised over")
      ->capture_default_str();
  app.add_option("--calibration", o.calibration,
                 "dype-calibrate's calibration.json from real hardware: Figure 6 adds its measured P2P pairs");
  app.add_flag("--no-plots", o.no_plots, "write the report and CSVs only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (o.paper.empty()) o.paper = o.config_dir + "/paper/dype-tables.yaml";
  if (o.perfmodels.empty()) o.perfmodels = o.config_dir + "/perfmodels";
  try {
    return run(o);
  } catch (const dype::Error& e) {
    std::fprintf(stderr, "dype-eval: %s\n", e.what());
    return 2;
  }
}
