#include "scheduler/solver/score_bound.h"

#include <algorithm>

#include "scheduler/solver/period_search.h"

namespace dype::sched::detail {

namespace {

// Energy of one stage on kc over [first, last] with hand-off sides x_in + x_out, its devices idle
// for the rest of a period of at least `period` (figures.h's formula for that stage).
double stage_energy(const CostTables& t, int first, int last, int kc, double x_sides, double period) {
  const DeviceGroup g = t.group(kc);
  const PowerStates& p = t.power(g.kind);
  return g.count * ((t.exec_w(first, last, kc) - p.idle_w) * t.compute(first, last, kc) +
                    (p.xfer_w - p.idle_w) * x_sides + p.idle_w * period);
}

// The bound with the ends given by entry(kc) and exit(kc) (kInf: kc not at that end).
template <class Entry, class Exit>
double bound_with_ends(const CostTables& t, Objective objective, Entry entry, Exit exit) {
  const int n = t.num_kernels(), kcs = t.num_kc();
  // Every kernel runs in some stage, which (stages only growing) takes at least its fastest time
  // alone.
  double p_kernels = 0.0;
  if (t.ranges_grow()) {
    for (int k = 0; k < n; ++k) {
      double fastest = kInf;
      for (int kc = 0; kc < kcs; ++kc)
        fastest = std::min(fastest, std::max(t.alone(0.0, k, k, kc), t.carried(0.0, k, k, kc)));
      if (!(fastest < kInf)) return kInf;  // no group runs kernel k: no plan
      p_kernels = std::max(p_kernels, fastest);
    }
  }
  // One stage: its figures exactly.
  double one = kInf;
  for (int kc = 0; kc < kcs; ++kc) {
    const double in = entry(kc), out = exit(kc), c = t.compute(0, n - 1, kc);
    if (!(in < kInf) || !(out < kInf) || !(c < kInf)) continue;
    const double time = t.stage_time(in, 0, n - 1, kc, out);
    const double s = objective == Objective::perf      ? time
                     : objective == Objective::latency ? in + c
                                                       : stage_energy(t, 0, n - 1, kc, in + out, time);
    one = std::min(one, s);
  }
  if (n < 2) return objective == Objective::perf ? std::max(one, p_kernels) : one;
  // Two stages or more: a first stage [0, b] on kc opened with entry(kc) (its hand-off out >= 0)
  // and a last one [a, n - 1] closed with exit(kc) (its hand-off in >= 0), b < a.
  double first_t = kInf, last_t = kInf;
  for (int kc = 0; kc < kcs; ++kc) {
    const double in = entry(kc), out = exit(kc);
    if (in < kInf) {
      for (int b = 0; b + 1 < n; ++b) first_t = std::min(first_t, t.stage_time(in, 0, b, kc, 0.0));
    }
    if (out < kInf) {
      for (int a = 1; a < n; ++a) last_t = std::min(last_t, t.stage_time(0.0, a, n - 1, kc, out));
    }
  }
  double many = kInf;
  if (first_t < kInf && last_t < kInf) {
    const double period = std::max({p_kernels, first_t, last_t});
    if (objective == Objective::perf) {
      many = period;
    } else {
      double head = kInf, tail = kInf;
      for (int kc = 0; kc < kcs; ++kc) {
        const double in = entry(kc), out = exit(kc);
        for (int b = 0; b + 1 < n && in < kInf; ++b) {
          const double c = t.compute(0, b, kc);
          if (!(c < kInf)) continue;
          head = std::min(head, objective == Objective::latency
                                    ? in + c
                                    : stage_energy(t, 0, b, kc, in, std::max(period, t.stage_time(in, 0, b, kc, 0.0))));
        }
        for (int a = 1; a < n && out < kInf; ++a) {
          const double c = t.compute(a, n - 1, kc);
          if (!(c < kInf)) continue;
          tail = std::min(tail, objective == Objective::latency
                                    ? c
                                    : stage_energy(t, a, n - 1, kc, out, std::max(period, t.stage_time(0.0, a, n - 1, kc, out))));
        }
      }
      if (head < kInf && tail < kInf) many = head + tail;
    }
  }
  const double bound = std::min(one, many);
  return objective == Objective::perf ? std::max(bound, p_kernels) : bound;
}

}  // namespace

double score_lower_bound(const CostTables& t, Objective objective) {
  return bound_with_ends(t, objective, [&](int kc) { return t.entry(kc); }, [&](int kc) { return t.exit(kc); });
}

double score_lower_bound(const CostTables& t, Objective objective, int first, double entry, int last, double exit) {
  return bound_with_ends(
      t, objective, [&](int kc) { return kc == first ? entry : kInf; }, [&](int kc) { return kc == last ? exit : kInf; });
}

bool period_within(const CostTables& t, double p) {
  PeriodSearch search(t);
  return search.feasible(p);
}

}  // namespace dype::sched::detail
