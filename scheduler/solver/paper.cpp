// Algorithm 1 of the paper, generalised from dp[i][f][g] to dp[i][u] with u a usage vector over
// any number of kinds (usage.h). Line numbers below are Algorithm 1's.
//
// pass 1: Algorithm 1   fill dp_perf[i][u] and dp_eng[i][u], each keeping ONE schedule per state,
//                       chosen by the partial pipeline's period (its last stage without the
//                       transfer it will later send) or its energy at that period. That is where
//                       it can miss the optimum: the kept schedule's last stage still grows by
//                       X_{s+1} later, and a schedule it dropped might have grown less.
// pass 2: review        dp[|wl|][u] over every u and both tables, under the objective's caps, as
//                       the paper does for its trade-offs.
#include "scheduler/solver/paper.h"

#include <algorithm>
#include <string>

#include "scheduler/solver.h"
#include "scheduler/solver/format.h"
#include "scheduler/solver/usage.h"

namespace dype::sched::detail {

Found solve_paper(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  const Usage us(t);
  const int n = t.num_kernels();
  struct Entry {
    std::vector<StageSpec> stages;
    double value = kInf;
    bool ok = false;
  };
  // pass 1: Algorithm 1. Lines 2-5: both tables empty but for dp[0][0], the empty pipeline.
  const Pass fill{.number = 1, .name = "Algorithm 1: fill dp_perf and dp_eng"};
  std::vector<Entry> dp_perf(static_cast<std::size_t>(n + 1) * us.size);
  std::vector<Entry> dp_eng(dp_perf.size());
  dp_perf[0].ok = dp_eng[0].ok = true;
  dp_perf[0].value = dp_eng[0].value = 0;
  std::vector<StageSpec> cand;
  std::size_t evaluated = 0;
  for (int i = 1; i <= n; ++i) {               // line 6
    for (int u2 = 0; u2 < us.size; ++u2) {     // lines 7-8: every (f, g)
      for (int j = 1; j <= i; ++j) {           // line 9: the new stage runs wl[i-j, i)
        const int ip = i - j;
        for (int kc = 0; kc < t.num_kc(); ++kc) {  // lines 10 and 36: n_f FPGAs or n_g GPUs
          const DeviceGroup g = t.group(kc);
          if (us.digits[u2][g.kind] < g.count) continue;
          if (!(t.compute(ip, i - 1, kc) < kInf)) continue;
          const int u1 = u2 - g.count * us.stride[g.kind];
          for (int table = 0; table < 2; ++table) {  // lines 12 and 13: each table its own prev
            auto& dp = table == 0 ? dp_perf : dp_eng;
            const Entry& prev = dp[static_cast<std::size_t>(ip) * us.size + u1];
            if (!prev.ok) continue;
            // Lines 14-24: the new stage's transfer in and compute, the previous stage's transfer
            // out, the new longest stage; line 31: f_eng at that period.
            cand = prev.stages;
            cand.push_back({ip, i - 1, kc});
            const Figures f = figures(cand, t, i == n);
            ++evaluated;
            const double v = table == 0 ? f.period : f.energy;
            // Lines 26-27 (dp_perf) and 32-33 (dp_eng): keep the new pipeline when it is better.
            Entry& cur = dp[static_cast<std::size_t>(i) * us.size + u2];
            if (!cur.ok || cur.value > v) cur = {cand, v, true};
          }
        }
      }
    }
  }
  // pass 2: review dp[|wl|][u] over every u (and both tables).
  const Pass review{.number = 2, .name = "review dp[|wl|][u] for the objective"};
  std::vector<Found> all;
  for (int u = 0; u < us.size; ++u) {
    for (const auto* dp : {&dp_perf, &dp_eng}) {
      const Entry& e = (*dp)[static_cast<std::size_t>(n) * us.size + u];
      if (e.ok) all.push_back({e.stages, figures(e.stages, t), true});
    }
  }
  double p_best = kInf;
  Found fill_found;  // what the tables hold at |wl|: the best period and the best energy
  fill_found.fig.period = fill_found.fig.energy = kInf;
  for (const Found& f : all) {
    p_best = std::min(p_best, f.fig.period);
    fill_found.fig.period = p_best;
    fill_found.fig.energy = std::min(fill_found.fig.energy, f.fig.energy);
    fill_found.ok = true;
  }
  if (log) log->add(fill, "Algorithm 1", fill_found, PassLog::count(evaluated, "schedule") + " evaluated");
  caps = caps_for(o, p_best);
  Found best;
  for (const Found& f : all) {
    if (!within(f.fig.period, caps.period) || !within(f.fig.latency, caps.latency)) continue;
    if (!best.ok || score(f.fig, o.objective) < score(best.fig, o.objective)) best = f;
  }
  if (log) log->add(review, "Algorithm 1", best, PassLog::count(all.size(), "complete schedule"));
  if (!best.ok && o.objective == Objective::qos) {
    throw InfeasibleError(std::string("qos (paper solver): no schedule in dp[|wl|] meets the targets; ") +
                          "best throughput " + fmt(1.0 / p_best, "/s"));
  }
  return best;
}

}  // namespace dype::sched::detail
