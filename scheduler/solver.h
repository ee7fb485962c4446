#pragma once
// DyPe's scheduler (paper Algorithm 1) and an exact replacement.
//
//   dype::sched::SystemSpec sys = dype::sched::paper_testbed();
//   auto wl = dype::sched::build_workload(cfg, input);
//   auto model = dype::sched::AdditiveCostModel::from_gflops(sys, wl);
//   dype::sched::Plan plan = dype::sched::solve(sys, model, {.objective = Objective::balanced});
//   std::cout << plan.mnemonic << " " << to_json(plan).dump(2);
//
// Solvers (implemented in scheduler/solver/, one job per file):
//  - exact (default): numbered passes of a period search and a label-setting DP (exact.cpp lists
//    them); returns the optimum of the cost model in plan.h over the whole search space
//    (contiguous stages, c >= 1 devices of one kind each, no device shared, unused devices
//    allowed, a stage's kind must run all its kernels).
//  - paper: Algorithm 1 generalised to any number of kinds; one schedule per dp[i][usage]. It can
//    miss the optimum because a stored schedule's last stage still grows by X_{s+1} later.
//  - milp: the mapping as a mixed-integer program solved by COIN-OR CBC (milp.h), after DiviML;
//    exact like the DP but built independently of it, for small instances (a few kernels).
//  - milp-split: DiviML's MILP-SPLIT (milp_split.h): the chain cut into modules, each module's MILP
//    solved per entry, exit and device budget, combined by a DP over the modules; the latency
//    objective only (exact there when spanning stages are additive, see the header).
//  Lower bounds on any solve's optimum (module split, LP relaxation): lower_bound.h.
//  - heft, critical-path, kl, overseer: heuristics from the literature, each as its paper defines
//    it and adapted to pipeline stages (the top of each file says how); they optimise what their
//    paper optimises (makespan, latency, load balance and communication), never energy, and never
//    beat the exact optimum. Kept to measure the exact solver against:
//      heft (heft.h): HEFT list scheduling, a kernel to the device group that finishes it first;
//      critical-path (critical_path.h): the critical path on the fastest devices that hold it;
//      kl (kl_partition.h): block partition over the devices with Kernighan-Lin refinement;
//      overseer (overseer.h): OverSeer's DP for the least sequential latency.
//  - brute_force.cpp: enumerate_plans() lists every plan; for tests on small instances.
// The passes a solve ran are in plan.passes (dype-schedule --explain prints them).
#include <string>
#include <vector>

#include "common/error.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"

namespace dype::sched {

enum class SolverKind { exact, paper, milp, milp_split, heft, critical_path, kl, overseer };
const char* to_string(SolverKind solver);
// "exact", "paper", "milp", "milp-split", "heft", "critical-path", "kl", "overseer"; InputError
// otherwise.
SolverKind solver_from_string(const std::string& name);

// Raised when an objective's constraints cannot be met; what() says which and by how much.
class InfeasibleError : public Error {
 public:
  using Error::Error;
};

Plan solve(const CostTables& tables, const ObjectiveSpec& objective,
           SolverKind solver = SolverKind::exact);
Plan solve(const SystemSpec& system, const CostModel& model, const ObjectiveSpec& objective,
           SolverKind solver = SolverKind::exact, const SpaceLimits& limits = {});

// Pareto front over (throughput up, energy per inference down, devices used down), Figure 9 of
// the paper; exact. Sorted by period.
std::vector<Plan> pareto_front(const CostTables& tables);

// Every feasible plan's figures, for tests.
struct EnumeratedPlan {
  std::vector<StageSpec> stages;
  double period_s;
  double latency_s;
  double energy_j;
  int devices;
};
std::vector<EnumeratedPlan> enumerate_plans(const CostTables& tables);
// The best plan among `all` for the objective (score kInf when none is feasible).
EnumeratedPlan best_of(const std::vector<EnumeratedPlan>& all, const ObjectiveSpec& objective);

// Fills Stage::why / runner_up / runner_up_score: for each stage, every other (kind, count) that
// fits beside the other stages is scored under the objective.
void explain(Plan& plan, const CostTables& tables, const ObjectiveSpec& objective);

}  // namespace dype::sched
