// OverSeer's NeuroPartitioner (Mukherjee et al., seed 004, section 2) on our chain of kernels.
//
// Canonicalisation (a spanning tree along the largest computation cost, a converging polytree)
// leaves a chain as it is, so it runs no pass here.
// pass 1: device selection  Eq. 2's top-down forward pass,
//                             cost(v, i) = f(v, i) + min_j (g(p -> v; j -> i) + cost(p, j)),
//                           then the bottom-up backtracking from the sink's cheapest device.
// pass 2: caps              the objective's caps (heuristic.h), for balanced and qos.
//
// Adaptation to pipeline stages (not in the paper):
//  - A device i of Eq. 2 is a device group (kind, count), a CostTables group kc, so the DP picks
//    the counts too. Consecutive kernels on one group are one stage and pay no g between them.
//  - OverSeer runs its partitions one after the other, so it may return to a device; a pipeline
//    may not (a device serves one stage). The DP's state therefore carries the devices already in
//    use (the usage index of usage.h) beside (v, i): cost(v, i) becomes cost(v, i, u), and a new
//    stage may open on kc only while kc's devices are free. Without it Eq. 2 could answer F, G, F
//    on a system with one F. The work grows from |D|^2 |V| to |D|^2 |V|^2 x usages.
//  - A run of kernels [a, b] on kc is one step of the recurrence priced compute(a, b, kc), the
//    range as our tables time it (Eq. 2 sums f(v, kc) over the run: the same for additive models),
//    entered with g = transfer_in(a - 1, kc_prev, kc) (entry(kc) for the first stage), the side of
//    a hand-off the plan's latency counts. Eq. 1's sum is then exactly the plan's latency
//    (figures.h), and the DP returns the least latency of every pipeline the devices allow. The
//    last stage's group must allow the exit.
//  - Ties go to the first found, in (kernel, group, usage) order.
// It minimises the sequential latency; the period and energy are not looked at, whatever the
// objective.
#include "scheduler/solver/overseer.h"

#include <algorithm>
#include <vector>

#include "scheduler/solver/heuristic.h"

namespace dype::sched::detail {

Found solve_overseer(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  const int n = t.num_kernels(), kcs = t.num_kc();
  const HeuristicName name{.solver = "overseer", .method = "OverSeer DP", .number = 2};
  const Pass select{.number = 1, .name = "Eq. 2: device per kernel, least latency", .goal = Goal::latency};
  const Usage us(t);
  const int size = us.size;
  const auto idx = [&](int b, int kc, int u) { return (static_cast<std::size_t>(b) * kcs + kc) * size + u; };
  struct Back {
    int a = -1;   // the run [a, b] that ends in this state
    int kc = -1;  // the state before it: (a - 1, kc, u)
    int u = -1;
  };
  std::vector<double> cost(static_cast<std::size_t>(n) * kcs * size, kInf);
  std::vector<Back> from(cost.size());
  std::size_t relaxed = 0;
  const auto relax = [&](std::size_t at, double v, Back back) {
    ++relaxed;
    if (v < cost[at]) cost[at] = v, from[at] = back;
  };
  // Forward pass, top-down: cost(b, kc, u) over the runs [a, b] on kc that end at b.
  for (int b = 0; b < n; ++b) {
    for (int kc = 0; kc < kcs; ++kc) {
      for (int a = b; a >= 0; --a) {
        const double c = t.compute(a, b, kc);
        if (!(c < kInf)) {
          if (t.ranges_grow()) break;
          continue;
        }
        if (a == 0) {
          const int u2 = us.next[kc];
          if (u2 >= 0 && t.entry(kc) < kInf) relax(idx(b, kc, u2), t.entry(kc) + c, {0, -1, -1});
          continue;
        }
        for (int pkc = 0; pkc < kcs; ++pkc) {
          const double g = t.transfer_in(a - 1, pkc, kc);
          for (int pu = 0; pu < size; ++pu) {
            const double before = cost[idx(a - 1, pkc, pu)];
            const int u2 = us.next[static_cast<std::size_t>(pu) * kcs + kc];
            if (before < kInf && u2 >= 0) relax(idx(b, kc, u2), before + g + c, {a, pkc, pu});
          }
        }
      }
    }
  }
  // Backtracking, bottom-up, from the sink's cheapest state.
  int end_kc = -1, end_u = -1;
  double least = kInf;
  for (int kc = 0; kc < kcs; ++kc) {
    if (!(t.exit(kc) < kInf)) continue;
    for (int u = 0; u < size; ++u) {
      if (cost[idx(n - 1, kc, u)] < least) least = cost[idx(n - 1, kc, u)], end_kc = kc, end_u = u;
    }
  }
  std::vector<StageSpec> stages;
  for (int b = n - 1, kc = end_kc, u = end_u; kc >= 0;) {
    const Back back = from[idx(b, kc, u)];
    stages.push_back({back.a, b, kc});
    b = back.a - 1, kc = back.kc, u = back.u;
  }
  std::reverse(stages.begin(), stages.end());
  if (log) log->add(select, name.method, priced(stages, t), PassLog::count(relaxed, "relaxation"));
  return answer(t, o, caps, log, std::move(stages), name);
}

}  // namespace dype::sched::detail
