// The brute force used by tests: every feasible plan and its figures, and the best of them for an
// objective, from the same cost formula (figures.h) and caps (objective.h) as the solvers.
#include <functional>

#include "scheduler/solver.h"
#include "scheduler/solver/figures.h"
#include "scheduler/solver/objective.h"

namespace dype::sched {

std::vector<EnumeratedPlan> enumerate_plans(const CostTables& t) {
  std::vector<EnumeratedPlan> out;
  std::vector<StageSpec> cur;
  std::vector<int> used(t.num_kinds(), 0);
  const int n = t.num_kernels();
  std::function<void(int)> rec = [&](int pos) {
    if (pos == n) {
      const Figures f = figures(cur, t);
      out.push_back({cur, f.period, f.latency, f.energy, f.devices});
      return;
    }
    for (int last = pos; last < n; ++last) {
      for (int kc = 0; kc < t.num_kc(); ++kc) {
        const DeviceGroup g = t.group(kc);
        if (used[g.kind] + g.count > t.max_count(g.kind)) continue;
        if (!(t.compute(pos, last, kc) < kInf)) continue;
        used[g.kind] += g.count;
        cur.push_back({pos, last, kc});
        rec(last + 1);
        cur.pop_back();
        used[g.kind] -= g.count;
      }
    }
  };
  rec(0);
  return out;
}

EnumeratedPlan best_of(const std::vector<EnumeratedPlan>& all, const ObjectiveSpec& o) {
  double p_best = kInf;
  for (const auto& p : all) p_best = std::min(p_best, p.period_s);
  const detail::Caps caps = detail::caps_for(o, p_best);
  const EnumeratedPlan* best = nullptr;
  for (const auto& p : all) {
    // A plan whose period is kInf cannot run (a group that cannot take its range, or an end a
    // recurrent solve pinned away), whatever its other figures say.
    if (!(p.period_s < kInf)) continue;
    if (!within(p.period_s, caps.period) || !within(p.latency_s, caps.latency)) continue;
    const double key = detail::score(p.period_s, p.energy_j, p.latency_s, o.objective);
    if (!best || key < detail::score(best->period_s, best->energy_j, best->latency_s, o.objective)) best = &p;
  }
  return best ? *best : EnumeratedPlan{{}, kInf, kInf, kInf, 0};
}

}  // namespace dype::sched
