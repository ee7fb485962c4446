#include "scheduler/solver/explain.h"

#include <string>
#include <vector>

#include "scheduler/solver.h"
#include "scheduler/solver/exact.h"
#include "scheduler/solver/format.h"

namespace dype::sched {
namespace detail {

void explain_with(Plan& plan, const CostTables& t, Objective obj, const Caps& caps) {
  std::vector<StageSpec> specs;
  for (const Stage& s : plan.stages) specs.push_back({s.first, s.last, t.kc({s.kind, s.count})});
  std::vector<int> used(t.num_kinds(), 0);
  for (const Stage& s : plan.stages) used[s.kind] += s.count;
  const char* unit = obj == Objective::perf ? "s period" : obj == Objective::latency ? "s latency" : "J/inference";
  const double own = score(plan.period_s, plan.energy_j, plan.latency_s, obj);
  for (std::size_t s = 0; s < specs.size(); ++s) {
    const StageSpec mine = specs[s];
    const DeviceGroup g = t.group(mine.kc);
    Stage& st = plan.stages[s];
    double best = kInf;
    std::string best_name;
    for (int kc = 0; kc < t.num_kc(); ++kc) {
      if (kc == mine.kc) continue;
      const DeviceGroup a = t.group(kc);
      if (used[a.kind] - (a.kind == g.kind ? g.count : 0) + a.count > t.max_count(a.kind)) continue;
      specs[s].kc = kc;
      const Figures f = figures(specs, t);
      double sc = score(f, obj);
      if (!(f.period < kInf) || !within(f.period, caps.period) || !within(f.latency, caps.latency)) sc = kInf;
      if (best_name.empty() || sc < best) {
        best = sc;
        best_name = std::to_string(a.count) + "x" + t.kind_name(a.kind);
      }
    }
    specs[s] = mine;
    const std::string me = std::to_string(g.count) + "x" + t.kind_name(g.kind);
    st.runner_up = best_name;
    st.runner_up_score = best;
    if (best_name.empty()) {
      st.why = me + ": the only (kind, count) that fits beside the other stages";
    } else if (!(best < kInf)) {
      st.why = me + ": " + fmt(own, unit) + "; every alternative, e.g. " + best_name +
               ", cannot run these kernels or breaks a constraint";
    } else {
      st.why = me + ": " + fmt(own, unit) + "; runner-up " + best_name + ": " + fmt(best, unit) + " (+" +
               percent(best, own) + ")";
    }
  }
}

}  // namespace detail

void explain(Plan& plan, const CostTables& tables, const ObjectiveSpec& objective) {
  double fastest = kInf;
  if (detail::caps_need_fastest(objective)) {
    detail::Caps ignore;
    fastest = detail::solve_exact(tables, {.objective = Objective::perf}, ignore, nullptr).fig.period;
  }
  detail::explain_with(plan, tables, objective.objective, detail::caps_for(objective, fastest));
}

}  // namespace dype::sched
