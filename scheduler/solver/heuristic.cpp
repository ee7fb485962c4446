#include "scheduler/solver/heuristic.h"

#include <string>
#include <utility>

#include "scheduler/solver.h"
#include "scheduler/solver/format.h"

namespace dype::sched::detail {

double mean_compute(const CostTables& t, int k, int max_group) {
  double sum = 0;
  int m = 0;
  for (int kc = 0; kc < t.num_kc(); ++kc) {
    const double c = t.compute(k, k, kc);
    if (t.group(kc).count <= max_group && c < kInf) sum += c, ++m;
  }
  return m ? sum / m : 0.0;
}

Completion::Completion(const CostTables& t, const Usage& us, int max_group)
    : t_(t), n_(t.num_kernels()), size_(us.size) {
  const int kcs = t.num_kc();
  rest_.assign(static_cast<std::size_t>(n_ + 1) * size_, 0);
  for (int u = 0; u < size_; ++u) rest_[static_cast<std::size_t>(n_) * size_ + u] = 1;
  for (int j = n_ - 1; j >= 0; --j) {
    for (int u = 0; u < size_; ++u) {
      bool ok = false;
      for (int kc = 0; kc < kcs && !ok; ++kc) {
        const int u2 = us.next[static_cast<std::size_t>(u) * kcs + kc];
        if (u2 < 0 || t.group(kc).count > max_group) continue;
        if (j == 0 && !(t.entry(kc) < kInf)) continue;
        for (int b = j; b < n_ && !ok; ++b) {
          if (!(t.compute(j, b, kc) < kInf)) {
            if (t.ranges_grow()) break;
            continue;
          }
          ok = b == n_ - 1 ? t.exit(kc) < kInf : rest(b + 1, u2);
        }
      }
      rest_[static_cast<std::size_t>(j) * size_ + u] = ok ? 1 : 0;
    }
  }
}

int Completion::last_close(int a, int k, int kc, int u, int limit) const {
  if (a == 0 && !(t_.entry(kc) < kInf)) return -1;
  int last = -1;
  for (int b = k; b <= limit; ++b) {
    if (!(t_.compute(a, b, kc) < kInf)) {
      if (t_.ranges_grow()) break;
      continue;
    }
    if (b == n_ - 1 ? t_.exit(kc) < kInf : rest(b + 1, u)) last = b;
  }
  return last;
}

Found priced(std::vector<StageSpec> stages, const CostTables& t) {
  Found f;
  if (stages.empty()) return f;
  f.fig = figures(stages, t);
  f.stages = std::move(stages);
  f.ok = f.fig.period < kInf;
  return f;
}

Found answer(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log, std::vector<StageSpec> stages,
             const HeuristicName& name) {
  Found f = priced(std::move(stages), t);
  caps = caps_for(o, f.ok ? f.fig.period : kInf);
  const bool capped = o.objective == Objective::balanced || o.objective == Objective::qos ||
                      (o.objective == Objective::latency && caps.period < kInf);
  if (!f.ok || !capped) return f;
  const bool meets = within(f.fig.period, caps.period) && within(f.fig.latency, caps.latency);
  const Pass check{.number = name.number,
                   .name = o.objective == Objective::balanced ? "balanced: cap from its own period"
                           : o.objective == Objective::qos    ? "qos: the targets"
                                                              : "latency: the throughput floor",
                   .period_cap = caps.period,
                   .latency_cap = caps.latency};
  Found kept = meets ? f : Found{};
  if (log) log->add(check, name.method, kept, meets ? "plan within the caps" : "plan outside the caps");
  if (!meets && o.objective != Objective::balanced) {
    std::string why;
    if (!within(f.fig.period, caps.period)) why += "period " + fmt(f.fig.period, "s") + " > " + fmt(caps.period, "s");
    if (!within(f.fig.latency, caps.latency)) {
      if (!why.empty()) why += ", ";
      why += "latency " + fmt(f.fig.latency, "s") + " > " + fmt(caps.latency, "s");
    }
    throw InfeasibleError(std::string(to_string(o.objective)) + " (" + name.solver + " solver): its plan misses the targets: " + why);
  }
  return kept;
}

}  // namespace dype::sched::detail
