#include "scheduler/solver/label_dp.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace dype::sched::detail {
namespace {

// Lexicographic "better" with a relative tolerance on the first key, so float noise in one
// solver's summation order does not flip a tie.
bool better(double a1, double a2, double b1, double b2) {
  const double tol = 1e-12 * std::max(std::abs(a1), std::abs(b1));
  if (a1 < b1 - tol) return true;
  if (a1 > b1 + tol) return false;
  return a2 < b2;
}

inline bool dominates(const Label& x, const Label& y, unsigned dims) {
  return (!(dims & kMaxT) || x.max_t <= y.max_t) &&
         (!(dims & kPartial) || (x.partial <= y.partial && x.solo <= y.solo)) &&
         (!(dims & kA) || x.a <= y.a) && (!(dims & kLat) || x.lat <= y.lat);
}

// Keeps `set` free of dominated labels.
inline bool insert(std::vector<Label>& set, const Label& cand, unsigned dims) {
  for (const Label& l : set) {
    if (dominates(l, cand, dims)) return false;
  }
  std::erase_if(set, [&](const Label& l) { return dominates(cand, l, dims); });
  set.push_back(cand);
  return true;
}

}  // namespace

LabelDp::LabelDp(const CostTables& t, const Pass& pass, Bounds* shared)
    : t_(t), u_(t), pass_(pass), b_(shared ? shared : &own_) {
  n_ = t.num_kernels();
  kcs_ = t.num_kc();
  lists_.assign(static_cast<std::size_t>(n_ + 1) * u_.size * std::max(kcs_, 1), {});
  if (pass_.energy_ub < kInf && b_->w_delta.empty()) rest_energy_lb();
  use_q_ = pass_.period_cap < kInf;
  if (use_q_ && (b_->q.empty() || b_->cap != pass_.period_cap)) {
    b_->cap = pass_.period_cap;
    completion_bounds();
  }
  run();
}

std::vector<LabelDp::Final> LabelDp::finals() const {
  std::vector<Final> out;
  for (int u = 0; u < u_.size; ++u) {
    for (int kc = 0; kc < kcs_; ++kc) {
      const double x = t_.exit(kc);  // 0 but in a recurrent solve
      if (!(x < kInf)) continue;
      const DeviceGroup g = t_.group(kc);
      const double xfer_w = g.count * (t_.power(g.kind).xfer_w - t_.power(g.kind).idle_w);
      for (int id : lists_[state(n_, u, kc)]) {
        const Label& l = arena_[id];
        Final f;
        f.id = id;
        f.period = std::max({l.max_t, l.partial + x, l.solo});
        f.energy = l.a + xfer_w * x + f.period * u_.idle_w[u];
        f.latency = l.lat;
        f.devices = u_.devices[u];
        if (!within(f.period, pass_.period_cap) || !within(f.latency, pass_.latency_cap)) continue;
        out.push_back(f);
      }
    }
  }
  return out;
}

LabelDp::Final LabelDp::best() const {
  Final b;
  double b1 = kInf, b2 = kInf;
  for (const Final& f : finals()) {
    double k1 = 0, k2 = 0;
    switch (pass_.goal) {
      case Goal::period: k1 = f.period; k2 = f.energy; break;
      case Goal::energy: k1 = f.energy; k2 = f.period; break;
      case Goal::latency: k1 = f.latency; k2 = f.energy; break;
    }
    if (b.id < 0 || better(k1, k2, b1, b2) ||
        (!better(b1, b2, k1, k2) && !better(k1, k2, b1, b2) && f.devices < b.devices)) {
      b = f;
      b1 = k1;
      b2 = k2;
    }
  }
  return b;
}

std::vector<StageSpec> LabelDp::stages(int id) const {
  std::vector<StageSpec> out;
  for (; id >= 0 && arena_[id].kc >= 0; id = arena_[id].parent) {
    out.push_back({arena_[id].first, arena_[id].last, arena_[id].kc});
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// Whether a label for kernels [0, i) can still lead to an admissible plan. The caps' tests are
// monotone in the open stage's compute time: a stage that fails them cannot pass by growing.
inline bool LabelDp::within_caps(const Label& l) const {
  return within(l.partial, pass_.period_cap) && within(l.solo, pass_.period_cap) &&
         within(l.max_t, pass_.period_cap) && within(l.lat, pass_.latency_cap);
}

// opening: the label opens a stage at i on devices already in u.
inline bool LabelDp::keep(const Label& l, int u, int i, int kc, bool opening) const {
  if (!within_caps(l)) return false;
  if (pass_.energy_ub < kInf) {
    const double rest = opening ? b_->v_delta[state(i, u, kc)] : b_->w_delta[state(i, u, kc)];
    const double lb = l.a + rest + std::max({l.max_t, l.partial, l.solo, b_->rest_period[i]}) * u_.idle_w[u];
    if (!within(lb, pass_.energy_ub)) return false;
  }
  return true;
}

inline void LabelDp::insert_state(std::size_t s, const Label& cand) {
  std::vector<int>& list = lists_[s];
  for (int id : list) {
    if (dominates(arena_[id], cand, pass_.dims)) return;
  }
  std::erase_if(list, [&](int id) { return dominates(cand, arena_[id], pass_.dims); });
  list.push_back(static_cast<int>(arena_.size()));
  arena_.push_back(cand);
}

void LabelDp::run() {
  // The empty pipeline: the root every plan's parent chain ends at.
  arena_.push_back({.max_t = 0, .partial = 0, .a = 0, .lat = 0, .solo = 0, .parent = -1, .first = -1, .last = -1, .kc = -1});
  std::vector<Label> opening;
  std::vector<int> live_kp;
  for (int ip = 0; ip < n_; ++ip) {
    // Rows (ip, u1) in order, skipping empty ones; each group kc that still fits opens a stage
    // on top of them, at usage u2 = u1 + kc.
    for (int u1 = 0; u1 < u_.size; ++u1) {
      live_kp.clear();
      if (ip == 0) {
        if (u1 != 0) continue;
      } else {
        for (int kp = 0; kp < kcs_; ++kp) {
          if (!lists_[state(ip, u1, kp)].empty()) live_kp.push_back(kp);
        }
        if (live_kp.empty()) continue;
      }
      for (int kc = 0; kc < kcs_; ++kc) {
        const DeviceGroup g = t_.group(kc);
        const int u2 = u_.next[static_cast<std::size_t>(u1) * kcs_ + kc];
        if (u2 < 0 || g.count > pass_.max_group) continue;
        const PowerStates& p = t_.power(g.kind);
        const double xfer_w = g.count * (p.xfer_w - p.idle_w);
        // Step 1: close the previous stage with its transfer into g.
        opening.clear();
        if (ip == 0) {
          const double x = t_.entry(kc);  // 0 but in a recurrent solve
          const Label o{.max_t = 0, .partial = x, .a = xfer_w * x, .lat = x, .solo = 0, .parent = 0, .first = 0, .last = 0, .kc = kc};
          if (x < kInf && (!use_q_ || x <= b_->r[state(0, u2, kc)])) opening.push_back(o);
        } else {
          for (int kp : live_kp) {
            const DeviceGroup gp = t_.group(kp);
            const PowerStates& pp = t_.power(gp.kind);
            const double xfer_wp = gp.count * (pp.xfer_w - pp.idle_w);
            // The previous stage closes with its side of the hand-off; this one opens with its own.
            const double xo = t_.transfer_out(ip - 1, kp, kc);
            const double x = t_.transfer_in(ip - 1, kp, kc);
            for (int id : lists_[state(ip, u1, kp)]) {
              const Label& l = arena_[id];
              const Label o{.max_t = std::max({l.max_t, l.partial + xo, l.solo}),
                            .partial = x,
                            .a = l.a + xfer_wp * xo + xfer_w * x,
                            .lat = l.lat + x,
                            .solo = 0,
                            .parent = id,
                            .first = 0,
                            .last = 0,
                            .kc = kc};
              if (!keep(o, u2, ip, kc, true) || (use_q_ && x > b_->r[state(ip, u2, kc)])) continue;
              insert(opening, o, pass_.dims);
            }
          }
        }
        if (opening.empty()) continue;
        // Step 2: the new stage runs kernels [ip, i - 1].
        const bool grow = t_.ranges_grow();
        for (int i = ip + 1; i <= n_; ++i) {
          const double c = t_.compute(ip, i - 1, kc);
          if (!(c < kInf)) {
            if (grow) break;
            continue;
          }
          const std::size_t s = state(i, u2, kc);
          const double exec_w = g.count * (t_.exec_w(ip, i - 1, kc) - p.idle_w);
          bool capped = true;
          for (const Label& o : opening) {
            // o.partial is the stage's transfer-in here (the opening label's).
            const Label l{.max_t = o.max_t,
                          .partial = t_.carried(o.partial, ip, i - 1, kc),
                          .a = o.a + exec_w * c,
                          .lat = o.lat + c,
                          .solo = t_.alone(o.partial, ip, i - 1, kc),
                          .parent = o.parent,
                          .first = ip,
                          .last = i - 1,
                          .kc = kc};
            if (!within_caps(l)) continue;
            capped = false;
            if (!keep(l, u2, i, kc) || (use_q_ && l.partial > b_->q[s])) continue;
            insert_state(s, l);
          }
          if (capped && grow) break;  // a longer stage breaks the caps too
        }
      }
    }
  }
}

Found run_pass(const CostTables& t, const Pass& pass, PassLog* log, LabelDp::Bounds* shared) {
  LabelDp dp(t, pass, shared);
  const auto b = dp.best();
  Found f;
  if (b.id >= 0) {
    f.stages = dp.stages(b.id);
    f.fig = figures(f.stages, t);
    f.ok = true;
  }
  if (log) log->add(pass, "label DP", f, PassLog::count(dp.labels(), "label"));
  return f;
}

}  // namespace dype::sched::detail
