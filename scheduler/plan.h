#pragma once
// A pipeline plan: contiguous stages of kernels, each on c devices of one kind, with its modelled
// period, latency and energy per inference, and the reasons behind each stage's kind and count.
//
// Cost model (ARCHITECTURE.md "Scheduler", paper Sections II-A/II-B):
//   X_s = f_comm(output of kernel a_s - 1, (t_{s-1}, c_{s-1}) -> (t_s, c_s))
//   T_s = X_s + C_s + X_{s+1}           (a transfer occupies both sides; serial transfers, the paper's;
//                                        overlapping ones: max(kernels, X_s + copies + X_{s+1}))
//   P = max_s T_s, throughput = 1 / P, latency = sum_s (X_s + C_s)
//   E = sum_s c_s (p_exec C_s + p_xfer (X_s + X_{s+1}) + p_idle (P - T_s))
// Boundary convention (used by every solver, the enumerator and evaluate()): the request's input
// is already resident where stage 1 runs and the result stays where the last stage ran, so
// X_1 = X_{S+1} = 0. Host I/O is identical for every plan that starts/ends on the same kind and
// is the runtime's business, as in Algorithm 1 (dp[0] is an empty pipeline with time 0).
// Devices a plan leaves unused are powered off for the plan's purposes (not counted).
// The formula is written once, in scheduler/solver/figures.h; evaluate() below uses it.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scheduler/cost_tables.h"

namespace dype::sched {

// latency: least end-to-end latency of one request (sum of its stages' inbound transfer and
// compute), under an optional throughput floor (min_throughput_per_s); the objective of the
// latency-minimising planners of seeds 000, 002 and 004.
enum class Objective { perf, energy, balanced, qos, latency };
const char* to_string(Objective objective);
Objective objective_from_string(const std::string& name);  // InputError on unknown names

struct ObjectiveSpec {
  Objective objective = Objective::perf;
  double balance_ratio = 0.7;         // balanced: throughput >= ratio x the perf optimum
  double min_throughput_per_s = 0.0;  // qos, latency: 0 = no throughput target
  double max_latency_s = kInf;        // qos: kInf = no latency target
};

// Stage layout without costs: kernels [first, last] on group kc of the tables.
struct StageSpec {
  int first = 0;
  int last = 0;
  int kc = 0;
};

struct Stage {
  int first = 0;
  int last = 0;
  int kind = 0;
  int count = 1;
  double compute_s = 0.0;
  double transfer_in_s = 0.0;
  double transfer_out_s = 0.0;
  // Copies inside compute_s (CostModel::copy_time_s) and whether they overlap the kernels
  // (SystemSpec::transfers): then the stage takes the largest of its kernels, its inbound copies
  // (with X_in) and its outbound ones (with X_out), each direction on its own engine.
  double copy_s = 0.0;
  double waited_copy_s = 0.0;  // of copy_s, what the kernels wait for (counts on every side)
  double copy_in_s = 0.0;      // of copy_s, the inbound direction (host -> device, received)
  double copy_out_s = 0.0;     // of copy_s, the outbound direction (device -> host, sent)
  double blocked_s = 0.0;      // what waits for the previous request's output (CostTables::blocked)
  double stall_s = 0.0;        // input, head kernels and first exchange in a row (CostTables::stall)
  bool overlap = false;
  double kernels_s() const { return compute_s - copy_s + waited_copy_s; }
  double inbound_s() const { return std::max(transfer_in_s + copy_in_s, stall_s); }
  double outbound_s() const { return std::max(copy_out_s, blocked_s) + transfer_out_s; }
  double time_s() const {
    return overlap ? std::max({kernels_s(), inbound_s(), outbound_s()}) : transfer_in_s + compute_s + transfer_out_s;
  }
  // Explanation: why this kind and count, and the best alternative for this stage's kernels with
  // every other stage kept (its objective score; kInf when no alternative fits).
  std::string why;
  std::string runner_up;
  double runner_up_score = kInf;
};

// One pass a solver ran (numbered as in scheduler/solver/exact.cpp and paper.cpp), with what it
// found, for dype-schedule --explain. Not part of to_json().
struct SolverPass {
  int number = 0;
  std::string name;     // "fastest: min period"
  std::string method;   // "period search", "label DP", "Algorithm 1", ...
  bool found = false;   // a plan came out
  double period_s = kInf;
  double energy_j = kInf;
  std::string work;     // how much it searched: "23 checks", "812 labels"
};

struct Plan {
  std::vector<Stage> stages;
  std::vector<std::string> kind_names;  // index = Stage::kind
  // Each kind's host (index = Stage::kind); empty when the system lists no hosts (one host).
  std::vector<std::string> kind_hosts;
  // Where stage kind `kind` runs: "host:kind" on a multi-host system, else the kind's name.
  std::string where(int kind) const;
  std::string mnemonic;                 // "3F2G"
  double period_s = kInf;
  double throughput_per_s = 0.0;
  double latency_s = kInf;
  double energy_j = kInf;  // per inference
  int devices_used = 0;
  std::string objective;
  std::string solver;
  double solve_time_s = 0.0;
  double score = kInf;  // the objective's value (period for perf, latency for latency, energy otherwise)
  std::string note;     // e.g. how a baseline was formed
  std::vector<SolverPass> passes;  // the passes solve() ran, in order (empty for baselines)
  // Layer-recurrent plans (recurrent.h): every request makes `rounds` trips through the stages,
  // which index the `round_kernels` kernels of one round. Flat plans: 1 and 0.
  int rounds = 1;
  int round_kernels = 0;
  bool empty() const { return stages.empty(); }
};

// Fills every cost of the plan from the tables. Stages must cover all kernels contiguously.
Plan evaluate(const std::vector<StageSpec>& stages, const CostTables& tables);
std::string mnemonic(const std::vector<StageSpec>& stages, const CostTables& tables);

// True when `value <= bound` up to a relative 1e-9 (so solvers and the enumerator agree at a
// constraint's edge whatever order they summed in).
inline bool within(double value, double bound) {
  return value <= bound + 1e-9 * (bound < 0 ? -bound : bound);
}

nlohmann::json to_json(const Plan& plan);

}  // namespace dype::sched
