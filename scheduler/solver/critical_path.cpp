// Critical Path partitioning (Mayer et al., seed 002, section 3.2.2) with PCT scheduling (4.1), on
// our chain of kernels.
//
// pass 1: critical path   downward ranks downRank(k) = c(k) + downRank(k - 1) (Eq. 6), c(k) the
//                         kernel's mean time over the groups that can run it; the critical path
//                         runs back from the sink with the largest downward rank along the
//                         predecessors. On a chain that is kernel n - 1 and the path is every
//                         kernel, so Eq. 7 (vertices off the path to the least-loaded device) has
//                         nothing to place and PCT scheduling (Eq. 12) nothing to order: each
//                         device runs its kernels in chain order.
// pass 2: assignment      the path goes whole to the fastest device that can hold it; when none
//                         can, it is "divided among the fastest devices".
// pass 3: caps            the objective's caps (heuristic.h), for balanced and qos.
//
// Adaptation to pipeline stages (not in the paper):
//  - A device is a device group (kind, count), a CostTables group kc, drawn from the devices not in
//    use yet: the runtime runs a stage on c devices as one, so "the fastest device" may be three
//    GPUs together. A piece of the path on one group is one stage.
//  - The paper's device speed s_i (a vertex takes c_i / s_i) becomes, per group, the path's work it
//    can run over the time it takes: s(kc) = sum c(k) / sum compute(k, k, kc) over the kernels k
//    that kc can run. Ties: fewer devices, then the lower group.
//  - A group "holds" kernels [a, b] when compute(a, b, kc) < kInf (its kind runs them all and they
//    fit its devices' memory), with the entry allowed if a = 0 and the exit if b = n - 1.
//  - Division: from the path's first unplaced kernel a, the fastest free group that can hold a
//    takes the longest run [a, b] it holds such that the kernels after b can still be covered by the
//    devices left (Completion, heuristic.h), and so on to the end of the path.
// It minimises the makespan by keeping the path off the network; the period and energy are not
// looked at, whatever the objective.
#include "scheduler/solver/critical_path.h"

#include <string>
#include <vector>

#include "scheduler/solver/heuristic.h"

namespace dype::sched::detail {

namespace {

// Whether group x is faster than group y (speed, then fewer devices, then the lower group).
bool faster(const CostTables& t, const std::vector<double>& speed, int x, int y) {
  if (y < 0) return true;
  if (speed[x] != speed[y]) return speed[x] > speed[y];
  if (t.group(x).count != t.group(y).count) return t.group(x).count < t.group(y).count;
  return x < y;
}

}  // namespace

Found solve_critical_path(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  const int n = t.num_kernels(), kcs = t.num_kc();
  const HeuristicName name{.solver = "critical-path", .method = "critical path", .number = 3};

  // pass 1: downward ranks; the critical path back from the sink with the largest one.
  const Pass path_pass{.number = 1, .name = "critical path: downward ranks", .goal = Goal::latency};
  std::vector<double> work(n), down(n);
  for (int k = 0; k < n; ++k) {
    work[k] = mean_compute(t, k);
    down[k] = work[k] + (k > 0 ? down[k - 1] : 0.0);
  }
  std::vector<int> path;  // from the sink back to the source: on a chain, n - 1 down to 0
  for (int k = n - 1; k >= 0; --k) path.push_back(k);
  if (log) {
    log->add(path_pass, name.method, {},
             PassLog::count(n, "downward rank") + ", path of " + PassLog::count(path.size(), "kernel"));
  }

  // pass 2: the path to the fastest device holding it, or divided among the fastest devices.
  const Pass assign{.number = 2, .name = "critical path to the fastest devices", .goal = Goal::latency};
  std::vector<double> speed(kcs, 0.0);
  for (int kc = 0; kc < kcs; ++kc) {
    double w = 0, time = 0;
    for (int k = 0; k < n; ++k) {
      const double c = t.compute(k, k, kc);
      if (c < kInf) w += work[k], time += c;
    }
    speed[kc] = time > 0 ? w / time : (w > 0 ? kInf : 0.0);
  }
  std::vector<StageSpec> stages;
  int whole = -1, holders = 0;
  for (int kc = 0; kc < kcs; ++kc) {
    if (t.compute(0, n - 1, kc) < kInf && t.entry(kc) < kInf && t.exit(kc) < kInf) {
      ++holders;
      if (faster(t, speed, kc, whole)) whole = kc;
    }
  }
  std::string done;
  if (whole >= 0) {
    stages.push_back({0, n - 1, whole});
    done = std::to_string(holders) + " of " + PassLog::count(kcs, "group") + " hold the whole path";
  } else {
    const Usage us(t);
    const Completion can(t, us);
    int u = 0;
    for (int a = 0; a < n;) {
      int best = -1, best_b = -1, best_u = -1;
      for (int kc = 0; kc < kcs; ++kc) {
        const int u2 = us.next[static_cast<std::size_t>(u) * kcs + kc];
        if (u2 < 0 || !faster(t, speed, kc, best)) continue;
        const int b = can.last_close(a, a, kc, u2);
        if (b >= 0) best = kc, best_b = b, best_u = u2;
      }
      if (best < 0) {  // nothing free can hold kernel a: only when no pipeline exists at all
        stages.clear();
        break;
      }
      stages.push_back({a, best_b, best});
      u = best_u;
      a = best_b + 1;
    }
    done = "no group holds the whole path; divided among " + PassLog::count(stages.size(), "group");
  }
  if (log) log->add(assign, name.method, priced(stages, t), done);
  return answer(t, o, caps, log, std::move(stages), name);
}

}  // namespace dype::sched::detail
