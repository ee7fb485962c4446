// The scheduler's entry points (solver.h): check the input, run the chosen solver's passes, turn
// the stages into a Plan with its figures, explanations and the passes that ran.
#include <algorithm>
#include <chrono>

#include "scheduler/solver.h"
#include "scheduler/solver/exact.h"
#include "scheduler/solver/explain.h"
#include "scheduler/solver/label_dp.h"
#include "scheduler/solver/milp.h"
#include "scheduler/solver/paper.h"

namespace dype::sched {

const char* to_string(SolverKind solver) {
  switch (solver) {
    case SolverKind::exact: return "exact";
    case SolverKind::paper: return "paper";
    case SolverKind::milp: return "milp";
  }
  return "exact";
}

Plan solve(const CostTables& tables, const ObjectiveSpec& objective, SolverKind solver) {
  const auto start = std::chrono::steady_clock::now();
  detail::check_objective(objective);
  detail::require_schedulable(tables);
  detail::Caps caps;
  detail::PassLog log;
  const detail::Found f = solver == SolverKind::exact   ? detail::solve_exact(tables, objective, caps, &log)
                          : solver == SolverKind::paper ? detail::solve_paper(tables, objective, caps, &log)
                                                        : detail::solve_milp(tables, objective, caps, &log);
  if (!f.ok) throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
  Plan plan = evaluate(f.stages, tables);
  plan.objective = to_string(objective.objective);
  plan.solver = to_string(solver);
  plan.score = detail::score(plan.period_s, plan.energy_j, objective.objective);
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
