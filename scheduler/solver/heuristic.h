#pragma once
// What the four planners from the literature share (heft.h, critical_path.h, kl_partition.h,
// overseer.h): per-kernel mean times for their ranks and shares, the look-ahead that keeps a
// greedy choice completable on the devices left, and how a heuristic's one plan answers an
// objective.
//
//   const Usage us(tables);
//   const Completion can(tables, us);          // kernels [k, n) still fit on what is left
//   if (can.open(a, k, kc, u)) ...              // a stage on kc over [a, k] can be closed later
//   return answer(tables, objective, caps, &log, stages, {.solver = "heft", .method = "HEFT", .number = 3});
//
// The heuristics optimise what their papers optimise (makespan, sequential latency, load balance
// and communication), never energy: each makes one stage list whatever the objective, priced by
// figures() like every other solver's, and answer() holds it to the objective's caps.
#include <vector>

#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"
#include "scheduler/solver/usage.h"

namespace dype::sched::detail {

// Kernel k's mean time alone over the groups of at most max_group devices that can run it
// (HEFT's w-bar, the critical-path ranks' c_i, the block partition's node cost); 0 when none can.
double mean_compute(const CostTables& tables, int k, int max_group = 1 << 30);

// Whether what a greedy heuristic has placed so far can still become a whole pipeline on the
// devices left: stages of at most max_group devices, a device in one stage only, every stage's
// group able to run its range, the first stage's entry and the last one's exit allowed. Computed
// once for every (first kernel, usage), usage as in usage.h.
class Completion {
 public:
  Completion(const CostTables& tables, const Usage& usage, int max_group = 1 << 30);

  // Kernels [first, n) can be covered by new stages on the devices not in use at u.
  bool rest(int first, int u) const { return rest_[static_cast<std::size_t>(first) * size_ + u] != 0; }
  // The last kernel b in [k, limit] at which a stage open on kc over [a, k] (its devices counted in
  // u) can close with the rest still coverable; -1 when none.
  int last_close(int a, int k, int kc, int u, int limit) const;
  int last_close(int a, int k, int kc, int u) const { return last_close(a, k, kc, u, n_ - 1); }
  bool open(int a, int k, int kc, int u) const { return last_close(a, k, kc, u) >= 0; }

 private:
  const CostTables& t_;
  int n_ = 0, size_ = 0;
  std::vector<char> rest_;  // [(n + 1) x usage]
};

struct HeuristicName {
  const char* solver = "";  // "heft", as to_string(SolverKind) names it
  const char* method = "";  // "HEFT", for PassLog
  int number = 0;           // the pass number the caps check gets
};

// Prices `stages` with figures(): ok when they form a pipeline (non-empty, finite period).
Found priced(std::vector<StageSpec> stages, const CostTables& tables);

// The heuristic's plan as the answer to `objective`. Caps come from caps_for(objective, period of
// this plan): balanced takes the heuristic's own plan as the fastest it knows, so its cap always
// holds; a plan outside qos targets is refused with InfeasibleError, as the other solvers refuse
// targets they cannot reach. Energy is not looked at. Logs the caps check as its own pass when the
// objective has caps.
Found answer(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log,
             std::vector<StageSpec> stages, const HeuristicName& name);

}  // namespace dype::sched::detail
