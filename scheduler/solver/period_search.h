#pragma once
// Exact min-period search: the "fastest" pass when no latency cap applies (exact.cpp, pass 1).
//
//   PeriodSearch search(tables);
//   const Found fastest = search.run(upper_bound_on_the_period);  // fastest.fig.period == P*
//
// For a fixed period bound P the problem collapses to a scalar DP: among partial plans whose
// closed stages all fit in P, the one whose open stage is shortest (min X_s + C_s) is best, since
// the future only needs partial + X_{s+1} <= P. That check costs (states x groups) +
// (states x kernels) plain double operations. P* is found exactly by a search on P that snaps to
// real plan periods from above (a feasible check returns a plan, hi = its period) and to the next
// event from below: an infeasible check at P also reports the smallest rejected stage time v_min,
// and since every check with P' < v_min makes identical decisions, P* >= v_min. The search ends
// when the check at lo succeeds (then P* = lo) or lo reaches hi, or when a check just below the
// best period found fails (then no plan is faster by more than a relative 1e-12).
#include <cstddef>
#include <vector>

#include "scheduler/solver/pass.h"
#include "scheduler/solver/usage.h"

namespace dype::sched::detail {

class PeriodSearch {
 public:
  // Relative margin of the "below the best period" probe: far above summation-order rounding (so
  // the check's sums and figures()' cannot disagree across it), far below any real difference.
  static constexpr double kBelow = 1e-12;
  static constexpr double kNarrow = 1e-3;  // bisect until hi - lo <= kNarrow * hi

  explicit PeriodSearch(const CostTables& t);

  // The fastest plan with period <= hi_bound (not ok when there is none).
  Found run(double hi_bound);
  // Whether some plan has period <= p_max (one check; what solve_shapes() prunes with).
  bool feasible(double p_max) { return check(p_max).ok; }
  int checks() const { return checks_; }

 private:
  struct Check {
    bool ok = false;
    double v_min = kInf;
    Found found;
  };

  std::size_t state(int i, int u, int kc) const { return (static_cast<std::size_t>(i) * u_.size + u) * kcs_ + kc; }

  Check check(double p_max);
  void drop_dominated_usage(int i);

  const CostTables& t_;
  Usage u_;
  int n_ = 0;
  int kcs_ = 0;
  int checks_ = 0;
  std::vector<double> best_below_;
  std::vector<double> part_;
  std::vector<int> pip_;
  std::vector<int> pkp_;
  std::vector<char> live_;  // [i][u]: some state (i, u, *) is reachable under the bound
  std::vector<int> live_kp_;
};

}  // namespace dype::sched::detail
