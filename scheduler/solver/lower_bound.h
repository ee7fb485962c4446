#pragma once
// Lower bounds on a solve's optimum, to judge a plan no solver proved optimal (dype-schedule
// --bound, dype-eval's solver comparison). Two of them:
//
//   const Bounds b = lower_bounds(tables, {.objective = Objective::latency});
//   if (b.split.ok) ...  b.split.value <= the optimum's latency (s)
//   b.best();            // the larger valid bound, -kInf when none applies
//
// 1. Module split, DiviML's recursive bound (seed 000, Section IV-B2) on a chain: cut the kernels
//    into modules (contiguous ranges, split_modules()); every module boundary is one channel, so
//    DiviML's dep/pre sets are the modules themselves. Any plan restricted to one module (a stage
//    that spans a cut is cut into its pieces, each on the same devices) is a plan of that module
//    alone, on a subset of the devices, entered without the cut's hand-off. Hence
//      latency: OPT >= sum_j OPT_j - sum_cuts delta_cut   (OPT_j: module j's least latency alone,
//               no throughput floor; delta_cut: the most C(a,m) + C(m+1,b) exceeds C(a,b) for a
//               range spanning the cut, 0 for additive cost models; each cut is spanned by at
//               most one stage of a plan, and dropped hand-offs only lower a module's figure);
//      perf:    P >= max_j (OPT_j - mu_left(j) - mu_right(j))   (OPT_j: module j's least period
//               alone with every device; mu_cut: the most a piece of a spanning stage takes longer
//               than the whole stage, in the contexts it can have, 0 when ranges only grow;
//               a stage's time only grows with its hand-off sides, so the free hand-in is fine).
//    1 / that period is a throughput upper bound for every plan (DiviML's UBound, Table IV).
//    Not reported for energy, balanced and qos: a stage spanning a cut draws idle power for one
//    period on its devices, but each module it touches would charge that idle energy again, so the
//    sum of module energies is no bound (and their caps do not split over modules either).
// 2. LP relaxation of the MILP (milp.h), every objective: the program solve_milp() solves with its
//    binaries relaxed (balanced: under the cap from the exact fastest period), unscaled. Valid by
//    construction (the MILP's optimum is the exact one); weak where big-M rows carry the period.
#include <string>
#include <vector>

#include "scheduler/solver.h"

namespace dype::sched {

struct Module {
  int first = 0;
  int last = 0;
};

// What a cut costs the module-split bound, per boundary m (after kernel m): the hand-off's mean
// time over group pairs (what a plan cutting there pays and the modules drop), plus the slack the
// objective needs there (delta for latency, mu for the period; kInf when a piece cannot run).
std::vector<double> cut_costs(const CostTables& tables, Objective objective);
double latency_slack(const CostTables& tables, int m);  // delta_cut above
double period_slack(const CostTables& tables, int m);   // mu_cut above

// The fewest modules of at most `max_kernels` kernels, cut where cut_costs() sums least.
std::vector<Module> split_modules(const CostTables& tables, int max_kernels, Objective objective);

struct SplitOptions {
  int max_module_kernels = 3;
  SolverKind module_solver = SolverKind::exact;  // each module's own optimum (exact or milp)
};

struct Bound {
  bool ok = false;
  double value = -kInf;  // lower bound on the objective's score: s (perf, latency) or J
  std::string method;    // "module split (2 modules: 0-2 3-4)", "LP relaxation (CLP)"
  std::string why_not;   // when !ok
  double solve_time_s = 0.0;  // measured
};

struct Bounds {
  Bound split, lp;
  double max_throughput_per_s = kInf;  // UBound: 1 / the split's period bound (any objective)
  double best() const;
};

Bound module_split_bound(const CostTables& tables, const ObjectiveSpec& objective, const SplitOptions& options = {});
Bound lp_relaxation_bound(const CostTables& tables, const ObjectiveSpec& objective);
// Both, and the throughput upper bound (a perf split bound, also for the other objectives).
Bounds lower_bounds(const CostTables& tables, const ObjectiveSpec& objective, const SplitOptions& options = {});

}  // namespace dype::sched
