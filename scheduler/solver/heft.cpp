// HEFT (Topcuoglu, Hariri and Wu 2002) as Mayer et al. use it as their baseline (seed 002, section
// 5.1: "we consider only feasible devices for a vertex"), on our chain of kernels.
//
// pass 1: task prioritising   upward ranks rank_u(k) = w(k) + c(k, k + 1) + rank_u(k + 1), with w(k)
//                             the kernel's mean time over the groups that can run it and c the mean
//                             hand-off (transfer_in) over the pairs of groups that can run both ends;
//                             the last kernel's successor is the pipeline's exit (0 unless a
//                             recurrent solve set it). Kernels sorted by decreasing rank: on a chain
//                             with times >= 0 this is always the chain order 0..n-1.
// pass 2: processor selection each kernel in that order goes to the processor with the earliest
//                             finish time (EFT), ties to the current stage, then to the lower group.
// pass 3: caps                the objective's caps (heuristic.h), for balanced and qos.
//
// Adaptation to pipeline stages (not in either paper):
//  - A processor is a device group (kind, count), a CostTables group kc. Continuing on the
//    processor that ran kernel k - 1 extends its stage; any other choice opens a new stage on a
//    group of devices not in use yet (no device serves two stages). So the count of a stage is the
//    count whose group gave its first kernel the earliest finish.
//  - EFT of kernel k: on the current stage [a, k - 1], start of the stage + compute(a, k) (the
//    range's time, as our tables give it; for additive models AFT(k - 1) + w(k), HEFT's own
//    formula with no communication); on a new group kc, AFT(k - 1) + transfer_in(k - 1, kc_prev, kc)
//    + compute(k, k, kc) (entry(kc) instead of the transfer for kernel 0). Finish times are one
//    request's, so the makespan HEFT minimises is the plan's latency (figures.h). The exit transfer
//    is added to the last kernel's EFT, as the edge to the artificial sink Mayer et al. describe.
//  - Mayer et al.'s "feasible devices": a group is considered only when it can run the kernel
//    (compute < kInf), has its devices free, and leaves the remaining kernels coverable by the
//    devices still free (Completion, heuristic.h); otherwise a greedy choice could strand a later
//    kernel no free group can run.
//  - HEFT's insertion policy has nothing to insert into: on a chain each processor's kernels run
//    back to back, so a kernel's earliest start is when its input arrives.
// HEFT optimises the makespan only: it ignores the period and energy, whatever the objective.
#include "scheduler/solver/heft.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "scheduler/solver/heuristic.h"

namespace dype::sched::detail {

namespace {

// Mean hand-off of kernel k's output over the group pairs that can run k and k + 1.
double mean_transfer(const CostTables& t, int k) {
  double sum = 0;
  int m = 0;
  for (int p = 0; p < t.num_kc(); ++p) {
    if (!(t.compute(k, k, p) < kInf)) continue;
    for (int q = 0; q < t.num_kc(); ++q) {
      if (t.compute(k + 1, k + 1, q) < kInf) sum += t.transfer_in(k, p, q), ++m;
    }
  }
  return m ? sum / m : 0.0;
}

double mean_exit(const CostTables& t) {
  double sum = 0;
  int m = 0;
  const int last = t.num_kernels() - 1;
  for (int kc = 0; kc < t.num_kc(); ++kc) {
    if (t.compute(last, last, kc) < kInf && t.exit(kc) < kInf) sum += t.exit(kc), ++m;
  }
  return m ? sum / m : 0.0;
}

}  // namespace

Found solve_heft(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  const int n = t.num_kernels(), kcs = t.num_kc();
  const HeuristicName name{.solver = "heft", .method = "HEFT", .number = 3};

  // pass 1: task prioritising by upward rank.
  const Pass ranks{.number = 1, .name = "task priorities: upward ranks", .goal = Goal::latency};
  std::vector<double> rank(n);
  for (int k = n - 1; k >= 0; --k) {
    rank[k] = mean_compute(t, k) + (k + 1 < n ? mean_transfer(t, k) + rank[k + 1] : mean_exit(t));
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return rank[x] > rank[y]; });
  const bool chain = std::is_sorted(order.begin(), order.end());  // always, with times >= 0
  if (log) log->add(ranks, name.method, {}, PassLog::count(n, "upward rank") + (chain ? ", chain order" : ""));
  if (!chain) return answer(t, o, caps, log, {}, name);

  // pass 2: processor selection by earliest finish time.
  const Pass select{.number = 2, .name = "processor selection: earliest finish", .goal = Goal::latency};
  const Usage us(t);
  const Completion can(t, us);
  std::vector<StageSpec> stages;
  int u = 0;         // devices in use, the current stage's included
  double start = 0;  // when the current stage's first kernel starts (its input arrived)
  double aft = 0;    // actual finish time of the last kernel placed
  std::size_t evaluated = 0;
  for (const int k : order) {  // the chain order: kernel k - 1 is in stages.back()
    double best = kInf, best_start = 0;
    int best_kc = -1, best_u = -1;
    bool extend = false;
    const bool last = k == n - 1;  // its EFT includes the exit, the edge to the sink
    if (!stages.empty()) {
      const StageSpec& cur = stages.back();
      const double c = t.compute(cur.first, k, cur.kc);
      ++evaluated;
      if (c < kInf && can.open(cur.first, k, cur.kc, u)) {
        best = start + c + (last ? t.exit(cur.kc) : 0.0);
        best_kc = cur.kc;
        extend = true;
      }
    }
    for (int kc = 0; kc < kcs; ++kc) {
      const int u2 = us.next[static_cast<std::size_t>(u) * kcs + kc];
      if (u2 < 0) continue;
      const double c = t.compute(k, k, kc);
      if (!(c < kInf) || !can.open(k, k, kc, u2)) continue;
      ++evaluated;
      const double est = stages.empty() ? t.entry(kc) : aft + t.transfer_in(k - 1, stages.back().kc, kc);
      const double eft = est + c + (last ? t.exit(kc) : 0.0);
      if (eft < best) {
        best = eft, best_start = est, best_kc = kc, best_u = u2;
        extend = false;
      }
    }
    if (best_kc < 0) {  // no group left can run it: only when no pipeline exists at all
      if (log) log->add(select, name.method, {}, PassLog::count(evaluated, "EFT") + " evaluated");
      return answer(t, o, caps, log, {}, name);
    }
    if (extend) {
      stages.back().last = k;
      aft = start + t.compute(stages.back().first, k, best_kc);
    } else {
      stages.push_back({k, k, best_kc});
      start = best_start;
      aft = best_start + t.compute(k, k, best_kc);
      u = best_u;
    }
  }
  if (log) log->add(select, name.method, priced(stages, t), PassLog::count(evaluated, "EFT") + " evaluated");
  return answer(t, o, caps, log, std::move(stages), name);
}

}  // namespace dype::sched::detail
