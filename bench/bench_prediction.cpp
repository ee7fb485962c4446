// How well the planner predicts what a plan does: for every flat plan of every paper Table I
// dataset (GCN and GIN, 2 layers, hidden 128, each dataset at its own feature length) on every
// paper testbed interconnect, the runtime planner's predicted period (rt::RuntimeCostModel, what
// dype-serve plans with) beside the period the pipeline reaches on the emulated devices
// (rt::modelled_period_s: timing-only, virtual clock). Both are MODELLED; a gap means the cost
// model and the runtime disagree about what a plan costs. Issue 17's target: within 5% everywhere.
//
//   ./build/release/bench/bench_prediction                    # the summary table
//   ./build/release/bench/bench_prediction --worst 5          # and each case's 5 worst plans
//   ./build/release/bench/bench_prediction --systems pcie4 --datasets S1,ogbn-arxiv
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "hw/system.h"
#include "hw/system_config.h"
#include "kernels/graph/generators.h"
#include "runtime/host_memory.h"
#include "runtime/pipeline.h"
#include "runtime/planner.h"
#include "scheduler/cost_tables.h"
#include "scheduler/solver.h"

using namespace dype;

namespace {

hw::System testbed(const std::string& interconnect) {
  auto sys = hw::System::from_config(hw::load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-" +
                                                            interconnect + ".yaml"));
  for (hw::Device* d : sys.devices())
    if (d->can_run_timing_only()) d->set_timing_only(true);
  return sys;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct PlanError {
  std::string mnemonic;
  double predicted_s = 0.0, runtime_s = 0.0;
  double error() const { return predicted_s / runtime_s - 1.0; }
};

}  // namespace

int main(int argc, char** argv) {
  rt::retain_freed_host_memory();
  std::vector<std::string> systems = {"pcie4", "pcie5", "cxl3"};
  std::vector<std::string> datasets;
  int worst = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--systems") systems = split(v);
    else if (a == "--datasets") datasets = split(v);
    else if (a == "--worst") worst = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown argument %s (--systems, --datasets, --worst)\n", a.c_str());
      return 2;
    }
  }
  std::printf("predicted period (RuntimeCostModel) vs the emulated pipeline's period, every flat plan (MODELLED both)\n");
  std::printf("%-6s %-5s %-14s %6s %9s %9s %9s %9s  %s\n", "system", "model", "dataset", "plans", "within5%", "median",
              "min", "max", "best plan (predicted / runtime ms)");
  int total = 0, within = 0;
  double worst_abs = 0.0;
  for (const std::string& sysname : systems) {
    for (const char* family : {"gcn", "gin"}) {
      for (const auto ds : kernels::kAllPaperDatasets) {
        const std::string dsname(kernels::to_string(ds));
        if (!datasets.empty() && std::find(datasets.begin(), datasets.end(), dsname) == datasets.end()) continue;
        const auto shape = kernels::paper_shape(ds);
        rt::ModelSpec s;
        s.layers = 2;
        s.in_features = shape.feature_len;
        s.hidden = 128;
        s.materialize_weights = false;
        const rt::Model m = std::string(family) == "gcn" ? rt::Model::gcn(s) : rt::Model::gin(s);
        hw::System sys = testbed(sysname);
        const auto graph = rt::Graph::shape_only(shape.nodes, shape.edges + shape.nodes);  // + self loops
        const rt::Request req = rt::Request::gnn(graph, rt::HostTensor::shape_only(shape.nodes, s.in_features));
        rt::SchedPlanner planner(m, sys);
        const auto spec = planner.system_spec({});
        const auto cm = planner.cost_model(spec, req.characteristics());
        const sched::CostTables tables(spec, cm);
        std::vector<PlanError> errs;
        for (const auto& e : sched::enumerate_plans(tables)) {
          const sched::Plan p = sched::evaluate(e.stages, tables);
          if (!(p.period_s < sched::kInf)) continue;
          const double rt_s = rt::modelled_period_s(m, rt::to_pipeline_spec(p, sys, {}), req, 2, 6);
          errs.push_back({p.mnemonic, p.period_s, rt_s});
        }
        if (errs.empty()) continue;
        std::vector<double> e;
        int ok = 0;
        for (const auto& x : errs) {
          e.push_back(x.error());
          ok += std::abs(x.error()) <= 0.05;
          worst_abs = std::max(worst_abs, std::abs(x.error()));
        }
        std::sort(e.begin(), e.end());
        const auto best = *std::min_element(errs.begin(), errs.end(),
                                            [](const PlanError& a, const PlanError& b) { return a.predicted_s < b.predicted_s; });
        std::printf("%-6s %-5s %-14s %6zu %8.1f%% %+8.1f%% %+8.1f%% %+8.1f%%  %s (%.3f / %.3f)\n", sysname.c_str(), family,
                    dsname.c_str(), errs.size(), 100.0 * ok / errs.size(), 100 * e[e.size() / 2], 100 * e.front(),
                    100 * e.back(), best.mnemonic.c_str(), best.predicted_s * 1e3, best.runtime_s * 1e3);
        total += static_cast<int>(errs.size());
        within += ok;
        if (worst > 0) {
          std::sort(errs.begin(), errs.end(),
                    [](const PlanError& a, const PlanError& b) { return std::abs(a.error()) > std::abs(b.error()); });
          for (int i = 0; i < worst && i < static_cast<int>(errs.size()); ++i)
            std::printf("    %-12s predicted %.3f ms, runtime %.3f ms (%+.1f%%)\n", errs[i].mnemonic.c_str(),
                        errs[i].predicted_s * 1e3, errs[i].runtime_s * 1e3, 100 * errs[i].error());
        }
        std::fflush(stdout);
      }
    }
  }
  std::printf("all: %d plans, %d (%.1f%%) within 5%%, worst |error| %.1f%%\n", total, within,
              total ? 100.0 * within / total : 0.0, 100 * worst_abs);
  return 0;
}
