#pragma once
// What an objective asks of a plan, written once for every solver, explain and the brute force:
// the caps a plan must meet and the score it is ranked by.
//
//   const Caps caps = caps_for(objective, fastest_period_s);  // balanced needs the fastest period
//   if (within(f.period, caps.period) && within(f.latency, caps.latency)) ... score(f, objective)
#include "scheduler/plan.h"
#include "scheduler/solver/figures.h"

namespace dype::sched::detail {

struct Caps {
  double period = kInf;
  double latency = kInf;
};

// perf, energy: none; balanced: period <= fastest / balance_ratio (kInf while the fastest period
// is unknown); qos: period <= 1 / min_throughput (when > 0), latency <= max_latency; latency:
// period <= 1 / min_throughput (when > 0).
Caps caps_for(const ObjectiveSpec& objective, double fastest_period_s);

// Whether caps_for() needs the fastest period (balanced).
inline bool caps_need_fastest(const ObjectiveSpec& objective) {
  return objective.objective == Objective::balanced;
}

// The objective's value of a plan, lower is better: the period for perf, the latency for latency,
// energy otherwise.
inline double score(double period_s, double energy_j, double latency_s, Objective objective) {
  return objective == Objective::perf ? period_s : objective == Objective::latency ? latency_s : energy_j;
}
inline double score(const Figures& f, Objective objective) { return score(f.period, f.energy, f.latency, objective); }

// InputError when the spec's numbers are out of range.
void check_objective(const ObjectiveSpec& objective);
// InfeasibleError when some kernel runs on no device kind at all.
void require_schedulable(const CostTables& tables);

}  // namespace dype::sched::detail
