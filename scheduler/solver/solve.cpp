// The scheduler's entry points (solver.h): check the input, run the chosen solver's passes, turn
// the stages into a Plan with its figures, explanations and the passes that ran.
#include <algorithm>
#include <chrono>
#include <string>

#include "scheduler/solver.h"
#include "scheduler/solver/critical_path.h"
#include "scheduler/solver/dispatch.h"
#include "scheduler/solver/exact.h"
#include "scheduler/solver/explain.h"
#include "scheduler/solver/heft.h"
#include "scheduler/solver/kl_partition.h"
#include "scheduler/solver/label_dp.h"
#include "scheduler/solver/milp.h"
#include "scheduler/solver/milp_split.h"
#include "scheduler/solver/overseer.h"
#include "scheduler/solver/paper.h"

namespace dype::sched {

const char* to_string(SolverKind solver) {
  switch (solver) {
    case SolverKind::exact: return "exact";
    case SolverKind::paper: return "paper";
    case SolverKind::milp: return "milp";
    case SolverKind::milp_split: return "milp-split";
    case SolverKind::heft: return "heft";
    case SolverKind::critical_path: return "critical-path";
    case SolverKind::kl: return "kl";
    case SolverKind::overseer: return "overseer";
  }
  return "exact";
}

SolverKind solver_from_string(const std::string& name) {
  const SolverKind all[] = {SolverKind::exact, SolverKind::paper, SolverKind::milp,
                            SolverKind::milp_split, SolverKind::heft, SolverKind::critical_path,
                            SolverKind::kl, SolverKind::overseer};
  std::string names;
  for (const SolverKind s : all) {
    if (name == to_string(s)) return s;
    names += std::string(names.empty() ? "" : ", ") + to_string(s);
  }
  throw InputError("solver", "unknown solver '" + name + "' (" + names + ")");
}

namespace detail {

Found run_solver(const CostTables& t, const ObjectiveSpec& o, SolverKind solver, Caps& caps, PassLog* log) {
  switch (solver) {
    case SolverKind::exact: return detail::solve_exact(t, o, caps, log);
    case SolverKind::paper: return detail::solve_paper(t, o, caps, log);
    case SolverKind::milp: return detail::solve_milp(t, o, caps, log);
    case SolverKind::milp_split: return detail::solve_milp_split(t, o, caps, log);
    case SolverKind::heft: return detail::solve_heft(t, o, caps, log);
    case SolverKind::critical_path: return detail::solve_critical_path(t, o, caps, log);
    case SolverKind::kl: return detail::solve_kl(t, o, caps, log);
    case SolverKind::overseer: return detail::solve_overseer(t, o, caps, log);
  }
  return detail::solve_exact(t, o, caps, log);
}

}  // namespace detail

Plan solve(const CostTables& tables, const ObjectiveSpec& objective, SolverKind solver) {
  const auto start = std::chrono::steady_clock::now();
  detail::check_objective(objective);
  detail::require_schedulable(tables);
  detail::Caps caps;
  detail::PassLog log;
  const detail::Found f = detail::run_solver(tables, objective, solver, caps, &log);
  if (!f.ok) throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
  Plan plan = evaluate(f.stages, tables);
  plan.objective = to_string(objective.objective);
  plan.solver = to_string(solver);
  plan.score = detail::score(plan.period_s, plan.energy_j, plan.latency_s, objective.objective);
  plan.passes = log.take();
  detail::explain_with(plan, tables, objective.objective, caps);
  plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

Plan solve(const SystemSpec& system, const CostModel& model, const ObjectiveSpec& objective,
           SolverKind solver, const SpaceLimits& limits) {
  const auto start = std::chrono::steady_clock::now();
  const CostTables tables(system, model, limits);
  Plan plan = solve(tables, objective, solver);
  plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

std::vector<Plan> pareto_front(const CostTables& tables) {
  detail::require_schedulable(tables);
  // Every non-dominated complete plan in (period, energy) survives a label DP without caps.
  const detail::LabelDp dp(tables, {.name = "pareto front",
                                    .goal = detail::Goal::energy,
                                    .dims = detail::kMaxT | detail::kPartial | detail::kA});
  auto finals = dp.finals();
  std::sort(finals.begin(), finals.end(), [](const auto& a, const auto& b) {
    if (a.period != b.period) return a.period < b.period;
    if (a.energy != b.energy) return a.energy < b.energy;
    return a.devices < b.devices;
  });
  std::vector<Plan> front;
  std::vector<detail::LabelDp::Final> kept;
  for (const auto& f : finals) {
    // Sorted by period, so only earlier (faster or equal) points can dominate f.
    bool dominated = false;
    for (const auto& k : kept) {
      if (k.energy <= f.energy && k.devices <= f.devices) {
        dominated = true;
        break;
      }
    }
    if (dominated) continue;
    kept.push_back(f);
    Plan p = evaluate(dp.stages(f.id), tables);
    p.objective = "pareto";
    p.solver = "exact";
    p.score = p.energy_j;
    front.push_back(std::move(p));
  }
  return front;
}

}  // namespace dype::sched
