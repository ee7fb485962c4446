#pragma once
// The evaluation's cases and what each measures. A case is one workload (a GNN on a Table I dataset,
// or the transformer at one (seq_len, window)) on one interconnect's testbed. Every method is
// planned as the daemon plans (RuntimeCostModel, fitted performance models, every FPGA image
// assignment) and then priced by the ground truth: the emulated devices' own timing models, which
// play the part of the paper's measurements. Everything is modelled.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/planning/schedule_inputs.h"
#include "scheduler/plan.h"
#include "scheduler/workload.h"

namespace dype::eval {

struct Interconnect {
  std::string name;         // "pcie4": the paper table's column name
  std::string label;        // "PCIe 4.0"
  std::string system_file;  // configs/systems/paper-testbed-pcie4.yaml
};

struct Workload {
  std::string family;   // "gnn" | "transformer"
  std::string model;    // "GCN", "GIN", "transformer"
  std::string dataset;  // Table I short name "S1".."S4", "OA", "OP"; "" for the transformer
  std::int64_t seq_len = 0, window = 0;
  std::string label() const;  // "GCN-OA", "T-2048/512"
};

// A plan's figures under one pricing.
struct Figures {
  bool feasible = false;
  std::string mnemonic;
  double throughput_per_s = 0.0;
  double energy_j = 0.0;  // per inference
  double solve_s = 0.0;   // measured
  std::string why;        // when infeasible
  double efficiency() const { return energy_j > 0 ? 1.0 / energy_j : 0.0; }
  // The objective's score (lower is better): period for perf, energy otherwise.
  double score(const std::string& mode) const;
};

struct ParetoPoint {
  std::string mnemonic;
  double throughput_per_s = 0.0;
  double energy_j = 0.0;
  int devices = 0;
};

// DiviML's lower bounds and MILP-SPLIT (scheduler/solver/lower_bound.h, milp_split.h) beside the
// exact optimum, on one set of flat cost tables (GNNs: the paper setting's, loaded images, planning
// model). NaN: not applicable (a bound not valid for the mode; milp-split outside latency).
struct BoundRow {
  double optimum = NAN, exact_ms = NAN;  // the exact solver's score (s or J) and solve time
  double split = NAN, split_ms = NAN;    // module-split bound (perf, latency)
  double lp = NAN, lp_ms = NAN;          // LP relaxation of the MILP
  std::string modules;                   // the split: "2 modules: 0-2 3-3"
  double milp_split = NAN, milp_split_ms = NAN, milp_ms = NAN;  // latency: MILP-SPLIT's and the MILP's
};

struct CaseResult {
  Workload workload;
  std::string interconnect;
  // "<method>/<mode>": dype, static, fleetrec, gpu-only, fpga-only, theoretical-additive (its
  // one figure under every mode), dype-paper-solver (Algorithm 1), oracle (planned from the ground
  // truth itself), dype-overlap (oracle with overlapping transfers), dype-milp (the MILP, GNNs),
  // solver-heft, solver-critical-path, solver-kl, solver-overseer (the other papers' planners),
  // dype-paper-setting (GNNs: the testbed's loaded FPGA images, flat plans, as the paper ran DyPe),
  // dype-additive (the same with the paper's additive cost model; transformers: the daemon's setting
  // with it), additive-<baseline> (each baseline planned and priced that way).
  std::map<std::string, Figures> planned;   // as the planner predicted (the planning model)
  std::map<std::string, Figures> measured;  // priced by the ground truth
  std::vector<ParetoPoint> pareto;          // when asked for (Figure 9)
  std::map<std::string, BoundRow> bounds;   // GNNs, by mode (perf, balanced, energy, latency)
};

struct CaseRequest {
  Workload workload;
  Interconnect interconnect;
  bool pareto = false;
};

struct EvalOptions {
  std::string config_dir;      // configs/
  std::string perfmodels_dir;  // fitted models the planner uses ("" = device models)
  double reload_horizon = 1000;
};

// A plan's stage layout (kernel ranges, kinds, counts) priced by another cost model of the same
// system and images, e.g. the ground truth or another input's.
Figures price(const sched::Plan& plan, const rt::ScheduleInputs& by);
// The input characteristics of a workload (Table I shapes for GNNs).
sched::InputCharacteristics input_of(const Workload& w);

// Model configs by Workload::model.
std::map<std::string, sched::ModelConfig> load_models(const std::string& config_dir);

// Runs every case, in parallel over the machine's cores; results in the order of `cases`.
// Throws InputError on bad configuration files.
std::vector<CaseResult> run_cases(const std::vector<CaseRequest>& cases, const EvalOptions& options);

}  // namespace dype::eval
