// The drift stream beside the paper's evaluation: the same phases as bench_runtime (a GCN stream
// S4 -> S1 -> S3, a transformer stream seq_len 1024 -> 4096 -> 16384 at window 512), equal requests
// per phase, served three ways: static (the first phase's plan throughout), dynamic (each phase's
// own plan, made from the fitted models) and oracle (each phase's best plan under the ground
// truth). Throughput is the requests over the sum of each phase's requests / throughput, every plan
// priced by the ground truth: modelled, and without the detection lag and pipeline swaps that
// bench_runtime measures on the emulated pipeline.
#include <algorithm>
#include <cmath>

#include "common/error.h"

#include "runtime/planning/planning_case.h"
#include "sections.h"

namespace dype::eval {

namespace {

struct StreamFigures {
  double stat = 0, dynamic = 0, oracle = 0;  // throughput over the stream
  std::vector<std::string> static_plans, dynamic_plans, oracle_plans;
};

// The phases' dynamic and oracle figures are the cases' own (dype/perf, oracle/perf); only the
// static plan, the first phase's, is priced again on the later phases' inputs.
StreamFigures stream(const std::vector<Workload>& phases, const Interconnect& ic, const sched::ModelConfig& model,
                     const std::vector<CaseResult>& cases, const EvalOptions& opt) {
  const auto spec_of = [&](const Workload& w, const std::string& perfmodels) {
    rt::CaseSpec spec;
    spec.system_file = ic.system_file;
    spec.model = model;
    spec.input = input_of(w);
    spec.perfmodels_dir = perfmodels;
    spec.reload_horizon = opt.reload_horizon;
    return spec;
  };
  const rt::CasePlan first = rt::PlanningCase(spec_of(phases[0], opt.perfmodels_dir)).plan({.objective = sched::Objective::perf});
  StreamFigures f;
  double t_static = 0, t_dynamic = 0, t_oracle = 0;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    const auto c = std::find_if(cases.begin(), cases.end(), [&](const CaseResult& r) {
      return r.interconnect == ic.name && r.workload.label() == phases[p].label();
    });
    if (c == cases.end()) throw Error("drift stream: no case for phase " + phases[p].label() + " on " + ic.name);
    const Figures& d = c->measured.at("dype/perf");
    const Figures& best = c->measured.at("oracle/perf");
    // The first phase's plan priced on this phase's input (same system and images, other sizes).
    const Figures s = p == 0 ? d : price(first.plan, rt::PlanningCase(spec_of(phases[p], "")).inputs(first.assignment));
    t_static += s.feasible ? 1.0 / s.throughput_per_s : INFINITY;
    t_dynamic += 1.0 / d.throughput_per_s;
    t_oracle += 1.0 / best.throughput_per_s;
    f.static_plans.push_back(s.feasible ? s.mnemonic : s.mnemonic + " (cannot run this phase)");
    f.dynamic_plans.push_back(d.mnemonic);
    f.oracle_plans.push_back(best.mnemonic);
  }
  const double n = static_cast<double>(phases.size());
  f.stat = n / t_static;
  f.dynamic = n / t_dynamic;
  f.oracle = n / t_oracle;
  return f;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " -> ") + s;
  return out;
}

}  // namespace

void drift_stream(const std::vector<CaseResult>& cases, const std::vector<Interconnect>& interconnects,
                  const EvalOptions& opt, Report& report) {
  const auto has = [&](const char* family) {
    return std::any_of(cases.begin(), cases.end(), [&](const CaseResult& c) { return c.workload.family == family; });
  };
  const auto models = load_models(opt.config_dir);
  struct Stream {
    const char* family;
    const char* name;
    std::vector<Workload> phases;
  };
  std::vector<Stream> streams;
  if (has("gnn"))
    streams.push_back({"gnn", "GCN S4 -> S1 -> S3", {{"gnn", "GCN", "S4"}, {"gnn", "GCN", "S1"}, {"gnn", "GCN", "S3"}}});
  if (has("transformer"))
    streams.push_back({"transformer",
                       "transformer seq_len 1024 -> 4096 -> 16384, window 512",
                       {{"transformer", "transformer", "", 1024, 512},
                        {"transformer", "transformer", "", 4096, 512},
                        {"transformer", "transformer", "", 16384, 512}}});
  report.md << "### The drift stream\n\n"
            << "bench_runtime's phases, equal requests each, perf mode: static keeps the first phase's plan, "
               "dynamic plans each phase from the fitted models, oracle takes each phase's best plan under the "
               "ground truth; every plan priced by the ground truth. Modelled from the plans' figures alone: the "
               "detection lag and pipeline swaps are not in it (`bench_runtime` measures them on the emulated "
               "pipeline).\n\n";
  std::vector<std::vector<std::string>> rows, csv;
  for (const Stream& s : streams) {
    for (const Interconnect& ic : interconnects) {
      const StreamFigures f = stream(s.phases, ic, models.at(s.phases[0].model), cases, opt);
      rows.push_back({s.name, ic.name, ratio(f.dynamic / f.stat), pct(100 * f.dynamic / f.oracle),
                      joined(f.dynamic_plans)});
      csv.push_back({s.family, ic.name, fmt(f.stat, 5), fmt(f.dynamic, 5), fmt(f.oracle, 5), joined(f.static_plans),
                     joined(f.dynamic_plans), joined(f.oracle_plans)});
    }
  }
  report.table({"stream", "interconnect", "dynamic / static", "dynamic / oracle", "dynamic plans"}, rows);
  report.csv("drift_stream.csv",
             {"stream", "interconnect", "static_per_s", "dynamic_per_s", "oracle_per_s", "static_plans",
              "dynamic_plans", "oracle_plans"},
             csv);
}

}  // namespace dype::eval
