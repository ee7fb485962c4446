// The exact solver as numbered passes. Which passes run depends on the objective, and each one
// that ran is recorded in the plan (Plan::passes, printed by dype-schedule --explain):
//
//   perf:     1, 2        energy:   4, 5        balanced: 1, 3*, 4*, 5        qos: 3*, 4*, 5
//   latency:  9
//   (* pass 3 runs only under a period cap on large spaces; pass 4 only when 3 gave no plan
//    within the cap)
//
// pass 1: fastest       the least period P* (period_search.h)
// pass 2: tie-break     among plans with period P*, the least energy (perf)
// pass 3: seed, free    least energy with one device per stage and no period cap: fast, and
//                       when its plan meets the cap its energy bounds pass 5
// pass 4: seed          least energy with one device per stage under the caps
// pass 5: cheapest      least energy under the caps over every (kind, count), pruned by the
//                       best energy a seed (or pass 1) found
// passes 6-8: diagnose  only when a qos target cannot be met: which one, and by how much
// pass 9: quickest      latency: the least latency, under the throughput floor when one is set
//                       (period dimensions then kept in the labels so the cap is exact; ties
//                       among equal latencies are not broken by energy)
//
// The caps come from caps_for() (objective.h): balanced holds the period to P* / ratio, qos to
// its throughput and latency targets. Every pass is exact, so the result is the optimum.
#include "scheduler/solver/exact.h"

#include <algorithm>
#include <string>

#include "scheduler/solver.h"
#include "scheduler/solver/format.h"
#include "scheduler/solver/label_dp.h"
#include "scheduler/solver/period_search.h"

namespace dype::sched::detail {
namespace {

// Best single-stage plan under the caps: a cheap feasible plan whose energy bounds the search.
double seed_energy(const CostTables& t, double period_cap, double latency_cap) {
  double best = kInf;
  for (int kc = 0; kc < t.num_kc(); ++kc) {
    const Figures f = figures({{0, t.num_kernels() - 1, kc}}, t);  // entry/exit: 0 but in a recurrent solve
    if (!(f.period < kInf) || !within(f.period, period_cap) || !within(f.latency, latency_cap)) continue;
    best = std::min(best, f.energy);
  }
  return best;
}

// pass 1: fastest.
Found fastest(const CostTables& t, PassLog* log) {
  const Pass pass{.number = 1, .name = "fastest: least period P*", .goal = Goal::period};
  // Any single-stage plan's period bounds the optimum from above.
  double ub = kInf;
  for (int kc = 0; kc < t.num_kc(); ++kc) ub = std::min(ub, figures({{0, t.num_kernels() - 1, kc}}, t).period);
  PeriodSearch search(t);
  const Found f = search.run(ub);
  if (log) log->add(pass, "period search", f, PassLog::count(static_cast<std::size_t>(search.checks()), "check"));
  return f;
}

// pass 2: tie-break. The period is pinned to P*, so E = a + P* B(u) and max_t drops out of the
// dominance test.
Found tie_break(const CostTables& t, const Found& fastest, const Caps& caps, unsigned lat, PassLog* log) {
  return run_pass(t,
                  {.number = 2,
                   .name = "tie-break: least energy at P*",
                   .goal = Goal::energy,
                   .dims = kPartial | kA | lat,
                   .period_cap = caps.period,
                   .latency_cap = caps.latency,
                   .energy_ub = std::min(fastest.fig.energy, seed_energy(t, caps.period, caps.latency))},
                  log);
}

// passes 3-5: the least energy under the caps; `ub` is a known plan's energy (kInf: none).
Found cheapest(const CostTables& t, const Caps& caps, unsigned lat, double ub, PassLog* log) {
  // The best plan with one device per stage is found fast (few groups, few labels) and its
  // energy bounds the full search, which then prunes most multi-device labels.
  const unsigned dims = kMaxT | kPartial | kA | lat;
  LabelDp::Bounds bounds;
  Found one;
  std::size_t states = static_cast<std::size_t>(t.num_kernels() + 1) * t.num_kc();
  for (int c : t.max_counts()) states *= static_cast<std::size_t>(c) + 1;  // usage vectors
  if (caps.period < kInf && states >= 1024) {
    // pass 3: without the period cap a single-stage plan bounds that search from its first label
    // (under the cap often none fits), so it runs much faster; its plan, when it meets the cap,
    // serves. Below ~1k label states the capped search takes microseconds and this pass would
    // dominate.
    Found free = run_pass(t,
                          {.number = 3,
                           .name = "seed: one device per stage, no period cap",
                           .goal = Goal::energy,
                           .dims = dims,
                           .latency_cap = caps.latency,
                           .energy_ub = std::min(ub, seed_energy(t, kInf, caps.latency)),
                           .max_group = 1},
                          log, &bounds);
    if (free.ok && within(free.fig.period, caps.period)) one = std::move(free);
  }
  ub = std::min(ub, seed_energy(t, caps.period, caps.latency));
  if (!one.ok) {
    // pass 4: seed.
    one = run_pass(t,
                   {.number = 4,
                    .name = "seed: one device per stage",
                    .goal = Goal::energy,
                    .dims = dims,
                    .period_cap = caps.period,
                    .latency_cap = caps.latency,
                    .energy_ub = ub,
                    .max_group = 1},
                   log, &bounds);
  }
  if (one.ok) ub = std::min(ub, one.fig.energy);
  // pass 5: cheapest.
  const Found all = run_pass(t,
                             {.number = 5,
                              .name = "cheapest: least energy under the caps",
                              .goal = Goal::energy,
                              .dims = dims,
                              .period_cap = caps.period,
                              .latency_cap = caps.latency,
                              .energy_ub = ub},
                             log, &bounds);
  return all.ok ? all : one;
}

// passes 6-8: diagnose an infeasible qos target: which constraint, and by how much.
[[noreturn]] void qos_infeasible(const CostTables& t, const ObjectiveSpec& o, const Caps& caps) {
  const unsigned lat = o.max_latency_s < kInf ? unsigned{kLat} : 0u;
  const Found fastest = run_pass(t, {.number = 6, .name = "diagnose: least period", .goal = Goal::period}, nullptr);
  if (o.min_throughput_per_s > 0 && !within(fastest.fig.period, caps.period)) {
    throw InfeasibleError("qos: min throughput " + fmt(o.min_throughput_per_s, "/s") +
                          " infeasible: best achievable " + fmt(1.0 / fastest.fig.period, "/s") +
                          " (short of the target by " +
                          percent(o.min_throughput_per_s, 1.0 / fastest.fig.period, o.min_throughput_per_s) + ")");
  }
  const Found quickest =
      run_pass(t, {.number = 7, .name = "diagnose: least latency", .goal = Goal::latency, .dims = kLat}, nullptr);
  if (!within(quickest.fig.latency, o.max_latency_s)) {
    throw InfeasibleError("qos: max latency " + fmt(o.max_latency_s, "s") + " infeasible: lowest achievable " +
                          fmt(quickest.fig.latency, "s") + " (over by " +
                          percent(quickest.fig.latency, o.max_latency_s) + ")");
  }
  const Found joint = run_pass(t,
                               {.number = 8,
                                .name = "diagnose: least latency under the throughput target",
                                .goal = Goal::latency,
                                .dims = kMaxT | kPartial | lat,
                                .period_cap = caps.period},
                               nullptr);
  throw InfeasibleError("qos: targets jointly infeasible: with throughput >= " +
                        fmt(o.min_throughput_per_s, "/s") + " the lowest latency is " +
                        fmt(joint.ok ? joint.fig.latency : kInf, "s") + " > max latency " +
                        fmt(o.max_latency_s, "s"));
}

// pass 9: the least latency under the caps; InfeasibleError when the throughput floor is out of reach.
Found quickest(const CostTables& t, const ObjectiveSpec& o, const Caps& caps, PassLog* log) {
  const bool capped = caps.period < kInf;
  const Found f = run_pass(t,
                           {.number = 9,
                            .name = capped ? "quickest: least latency under the throughput floor" : "quickest: least latency",
                            .goal = Goal::latency,
                            .dims = capped ? unsigned{kMaxT | kPartial | kLat} : unsigned{kLat},
                            .period_cap = caps.period},
                           log);
  if (!f.ok && capped) {
    const Found fastest = run_pass(t, {.number = 6, .name = "diagnose: least period", .goal = Goal::period}, nullptr);
    throw InfeasibleError("latency: min throughput " + fmt(o.min_throughput_per_s, "/s") +
                          " infeasible: best achievable " + fmt(fastest.ok ? 1.0 / fastest.fig.period : 0.0, "/s"));
  }
  return f;
}

}  // namespace

Found solve_exact(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  if (o.objective == Objective::latency) {
    caps = caps_for(o, kInf);
    return quickest(t, o, caps, log);
  }
  const bool perf = o.objective == Objective::perf;
  Found fast;
  if (perf || caps_need_fastest(o)) {
    fast = fastest(t, log);
    if (!fast.ok) return fast;
  }
  caps = caps_for(o, fast.ok ? fast.fig.period : kInf);
  const unsigned lat = caps.latency < kInf ? unsigned{kLat} : 0u;
  if (perf) {
    caps.period = fast.fig.period;  // explain holds alternatives to P* too
    Found e = tie_break(t, fast, caps, lat, log);
    return e.ok ? e : fast;
  }
  Found e = cheapest(t, caps, lat, fast.ok ? fast.fig.energy : kInf, log);
  if (!e.ok && o.objective == Objective::qos) qos_infeasible(t, o, caps);
  return e.ok || !fast.ok ? e : fast;
}

}  // namespace dype::sched::detail
