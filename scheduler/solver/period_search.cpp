#include "scheduler/solver/period_search.h"

#include <algorithm>

namespace dype::sched::detail {

PeriodSearch::PeriodSearch(const CostTables& t) : t_(t), u_(t) {
  n_ = t.num_kernels();
  kcs_ = t.num_kc();
  const std::size_t states = static_cast<std::size_t>(n_ + 1) * u_.size * kcs_;
  part_.resize(states);
  pip_.resize(states);
  pkp_.resize(states);
  live_.resize(static_cast<std::size_t>(n_ + 1) * u_.size);
}

Found PeriodSearch::run(double hi_bound) {
  Found best;
  double lo = 0, hi = hi_bound;
  // Probes: the midpoint while [lo, hi] is wide; then a cycle of just below the best period
  // found (one failed check there proves it optimal, instead of bisecting lo up to it), lo (P*
  // is often exactly the next event) and the midpoint.
  enum class Probe { mid, lo, below_hi } probe = Probe::mid;
  Probe next_narrow = Probe::below_hi;
  for (int iter = 0; iter < 4096; ++iter) {
    if (hi < kInf && hi - lo > kNarrow * hi) {
      probe = Probe::mid;
    } else {
      probe = next_narrow;
      next_narrow = probe == Probe::below_hi ? Probe::lo : probe == Probe::lo ? Probe::mid : Probe::below_hi;
    }
    double p;
    if (!(hi < kInf)) {
      p = kInf;  // no bound yet: any plan gives one
    } else if (probe == Probe::lo) {
      p = lo;
    } else if (probe == Probe::below_hi) {
      p = hi * (1 - kBelow);
    } else {
      p = lo + 0.5 * (hi - lo);
    }
    const Check c = check(p);
    if (c.ok) {
      const double found = c.found.fig.period;
      const bool progress = found < hi * (1 - kBelow);
      best = c.found;
      hi = found;
      if (probe == Probe::lo || hi <= lo) break;  // P* >= lo and a plan with period <= lo exists
      if (probe == Probe::below_hi && !progress) break;  // same period up to rounding
    } else {
      if (probe == Probe::below_hi && best.ok) break;  // no plan beats hi by more than kBelow
      if (!(c.v_min < kInf)) break;  // nothing was rejected: no plan at all
      lo = c.v_min;
      if (lo >= hi) break;
    }
  }
  if (!best.ok && hi < kInf) best = check(hi).found;  // lo met the caller's bound hi first
  return best;
}

PeriodSearch::Check PeriodSearch::check(double p_max) {
  ++checks_;
  Check r;
  std::fill(part_.begin(), part_.end(), kInf);
  std::fill(live_.begin(), live_.end(), 0);
  live_[0] = 1;
  const bool grow = t_.ranges_grow();
  double v_min = kInf;
  for (int ip = 0; ip < n_; ++ip) {
    if (ip > 0) drop_dominated_usage(ip);
    // Rows (ip, u1) in order; each group kc that still fits sends them to (ip, u1 + kc).
    for (int u1 = 0; u1 < u_.size; ++u1) {
      if (ip == 0 ? u1 != 0 : !live_[static_cast<std::size_t>(ip) * u_.size + u1]) continue;
      const double* prev = &part_[state(ip, u1, 0)];
      live_kp_.clear();
      if (ip > 0) {
        for (int kp = 0; kp < kcs_; ++kp) {
          if (prev[kp] < kInf) live_kp_.push_back(kp);
        }
      }
      for (int kc = 0; kc < kcs_; ++kc) {
        const int u2 = u_.next[static_cast<std::size_t>(u1) * kcs_ + kc];
        if (u2 < 0) continue;
        double best_x = kInf;
        int best_kp = -1;
        if (ip == 0) {
          best_x = t_.entry(kc);  // 0 but in a recurrent solve
          if (!(best_x < kInf)) continue;
        } else {
          for (int kp : live_kp_) {
            // The previous stage closes with its side of the hand-off; this one opens with its own.
            const double done = prev[kp] + t_.transfer_out(ip - 1, kp, kc);
            if (done > p_max) {
              v_min = std::min(v_min, done);
              continue;
            }
            const double x = t_.transfer_in(ip - 1, kp, kc);
            if (x < best_x) {
              best_x = x;
              best_kp = kp;
            }
          }
          if (!(best_x < kInf)) continue;
        }
        for (int i = ip + 1; i <= n_; ++i) {
          // The open stage carries what its transfer-out adds to (CostTables::carried); what it
          // needs alone (overlapping transfers: its kernels, its inbound copies) must fit too.
          const double v = t_.carried(best_x, ip, i - 1, kc);
          if (!(v < kInf)) {
            if (grow) break;
            continue;
          }
          const double solo = t_.alone(best_x, ip, i - 1, kc);
          if (v > p_max || solo > p_max) {
            v_min = std::min(v_min, std::max(v, solo));
            if (grow) break;  // longer ranges only get slower
            continue;
          }
          const std::size_t s = state(i, u2, kc);
          if (v < part_[s]) {
            part_[s] = v;
            pip_[s] = ip;
            pkp_[s] = best_kp;
            live_[static_cast<std::size_t>(i) * u_.size + u2] = 1;
          }
        }
      }
    }
  }
  std::size_t end = 0;
  double best = kInf;
  for (int u = 0; u < u_.size; ++u) {
    for (int kc = 0; kc < kcs_; ++kc) {
      const std::size_t s = state(n_, u, kc);
      const double v = part_[s] + t_.exit(kc);  // the last stage still sends its exit transfer
      if (!(part_[s] < kInf)) continue;
      if (v > p_max) {
        v_min = std::min(v_min, v);
        continue;
      }
      if (v < best) {
        best = v;
        end = s;
      }
    }
  }
  r.v_min = v_min;
  if (!(best < kInf)) return r;
  // Walk back: state (i, u, kc) came from (pip, u - group, pkp).
  std::vector<StageSpec> st;
  std::size_t s = end;
  int i = n_;
  int u = static_cast<int>((end / kcs_) % u_.size);
  int kc = static_cast<int>(end % kcs_);
  for (;;) {
    const int ip = pip_[s];
    st.push_back({ip, i - 1, kc});
    const int kp = pkp_[s];
    if (ip == 0) break;
    const DeviceGroup g = t_.group(kc);
    u -= g.count * u_.stride[g.kind];
    i = ip;
    kc = kp;
    s = state(i, u, kc);
  }
  std::reverse(st.begin(), st.end());
  r.ok = true;
  r.found.stages = std::move(st);
  r.found.fig = figures(r.found.stages, t_);
  r.found.ok = true;
  return r;
}

// States (i, u, kc) are final once the sweep reaches i. A state whose open stage is no shorter
// than that of some (i, u', kc) with u' <= u (fewer devices of every kind) cannot lead anywhere
// the smaller one cannot, so it is dropped. Usages ascend numerically along every u' <= u chain,
// so one pass carries the best value below each u (best_below_).
void PeriodSearch::drop_dominated_usage(int i) {
  const int kinds = static_cast<int>(u_.stride.size());
  bool any = false;
  for (int u = 0; u < u_.size; ++u) {
    if (!live_[static_cast<std::size_t>(i) * u_.size + u]) continue;
    any = true;
    break;
  }
  if (!any) return;
  best_below_.resize(static_cast<std::size_t>(u_.size) * kcs_);
  for (int u = 0; u < u_.size; ++u) {
    double* below = &best_below_[static_cast<std::size_t>(u) * kcs_];
    double* own = &part_[state(i, u, 0)];
    std::fill(below, below + kcs_, kInf);
    for (int t = 0; t < kinds; ++t) {
      if (u_.digits[u][t] == 0) continue;
      const double* sub = &best_below_[static_cast<std::size_t>(u - u_.stride[t]) * kcs_];
      for (int kc = 0; kc < kcs_; ++kc) below[kc] = std::min(below[kc], sub[kc]);
    }
    bool live = false;
    for (int kc = 0; kc < kcs_; ++kc) {
      if (own[kc] < kInf && below[kc] <= own[kc]) own[kc] = kInf;
      below[kc] = std::min(below[kc], own[kc]);
      live = live || own[kc] < kInf;
    }
    live_[static_cast<std::size_t>(i) * u_.size + u] = live ? 1 : 0;
  }
}

}  // namespace dype::sched::detail
