#include "scheduler/solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

namespace dype::sched {

const char* to_string(SolverKind solver) {
  return solver == SolverKind::exact ? "exact" : "paper";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

// Mixed-radix index over devices used per kind: u = sum_t used_t * stride_t.
struct Usage {
  std::vector<int> stride;
  std::vector<std::vector<int>> digits;  // [u][t]
  std::vector<double> idle_w;            // [u] = sum_t used_t * p_idle(t)
  std::vector<int> devices;              // [u]
  std::vector<int> next;                 // [u * kcs + kc] = u plus group kc, -1 when it does not fit
  int size = 1;

  explicit Usage(const CostTables& t) {
    for (int k = 0; k < t.num_kinds(); ++k) {
      stride.push_back(size);
      size *= t.max_count(k) + 1;
    }
    digits.assign(size, std::vector<int>(t.num_kinds(), 0));
    idle_w.assign(size, 0.0);
    devices.assign(size, 0);
    for (int u = 0; u < size; ++u) {
      int rest = u;
      for (int k = t.num_kinds() - 1; k >= 0; --k) {
        digits[u][k] = rest / stride[k];
        rest %= stride[k];
        idle_w[u] += digits[u][k] * t.power(k).idle_w;
        devices[u] += digits[u][k];
      }
    }
    const int kcs = t.num_kc();
    next.assign(static_cast<std::size_t>(size) * kcs, -1);
    for (int u = 0; u < size; ++u) {
      for (int kc = 0; kc < kcs; ++kc) {
        const DeviceGroup g = t.group(kc);
        if (digits[u][g.kind] + g.count <= t.max_count(g.kind)) {
          next[static_cast<std::size_t>(u) * kcs + kc] = u + g.count * stride[g.kind];
        }
      }
    }
  }
};

struct Figures {
  double period = 0, latency = 0, energy = 0;
  int devices = 0;
};

// Period, latency and energy of stages [0, size) as a complete pipeline (last stage sends
// nothing). The same formulas as evaluate(); used where building a Plan would be wasteful.
Figures figures(const std::vector<StageSpec>& st, const CostTables& t) {
  Figures f;
  const std::size_t n = st.size();
  auto x_in = [&](std::size_t s) { return s == 0 ? 0.0 : t.transfer(st[s].first - 1, st[s - 1].kc, st[s].kc); };
  std::vector<double> time(n), xin(n), comp(n);
  for (std::size_t s = 0; s < n; ++s) {
    xin[s] = x_in(s);
    comp[s] = t.compute(st[s].first, st[s].last, st[s].kc);
  }
  for (std::size_t s = 0; s < n; ++s) {
    const double xout = s + 1 < n ? xin[s + 1] : 0.0;
    time[s] = xin[s] + comp[s] + xout;
    f.period = std::max(f.period, time[s]);
    f.latency += xin[s] + comp[s];
  }
  for (std::size_t s = 0; s < n; ++s) {
    const DeviceGroup g = t.group(st[s].kc);
    const PowerStates& p = t.power(g.kind);
    const double xout = s + 1 < n ? xin[s + 1] : 0.0;
    f.energy += g.count * (p.exec_w * comp[s] + p.xfer_w * (xin[s] + xout) + p.idle_w * (f.period - time[s]));
    f.devices += g.count;
  }
  return f;
}

// Lexicographic "better" with a relative tolerance on the first key, so float noise in one
// solver's summation order does not flip a tie.
bool better(double a1, double a2, double b1, double b2) {
  const double tol = 1e-12 * std::max(std::abs(a1), std::abs(b1));
  if (a1 < b1 - tol) return true;
  if (a1 > b1 + tol) return false;
  return a2 < b2;
}

std::string fmt(double v, const char* unit) {
  char buf[64];
  if (!(v < kInf)) return "infeasible";
  std::snprintf(buf, sizeof buf, "%.4g %s", v, unit);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// Exact solver: label-setting DP.
//
// Why labels and not a parametric sweep over P: the period is a max over stages and the energy is
// E = A + P * B with A additive over stages and B = sum of idle power of the devices used (fixed
// by the usage vector). Candidate periods are every possible stage time (ranges x groups x
// neighbour groups: millions for the transformer), while the set of non-dominated partial plans
// per state is small in practice, so labels are both exact and fast.
//
// State (i, u, g): kernels [0, i) scheduled, u = devices used per kind, g = (kind, count) of the
// last, still open stage. A label of a partial plan is
//   max_t   = max T_s over the closed stages,
//   partial = X_s + C_s of the open stage (it still grows by X_{s+1}),
//   a       = sum c_s ((p_exec - p_idle) C_s + (p_xfer - p_idle)(X_s + X_{s+1})) so far,
//   lat     = sum (X_s + C_s).
// Every completion adds the same amounts to labels of one state, and the final figures
// (P = max(max_t, partial), E = a + P * B(u), latency = lat) are monotone in each, so a label
// dominated in (max_t, partial[, a][, lat]) can be dropped without losing the optimum; the
// paper's dp keeps one label (one schedule) per state and that is where it can go wrong.
// Transitions are split in two steps so their cost is (states x groups) + (states x kernels)
// instead of the product: close the open stage with the transfer into a new group g' (depends
// only on the boundary kernel and both groups), then extend g' over every range length.
// Pruning keeps exactness: caps on period/latency are hard constraints, and labels whose lower
// bound on the final energy exceeds a known plan's energy cannot win (needs p_exec, p_xfer >=
// p_idle, which SystemSpec::validate enforces).
// ---------------------------------------------------------------------------------------------

enum Dim : unsigned { kMaxT = 1, kPartial = 2, kA = 4, kLat = 8 };
enum class Goal { period, energy, latency };

struct Label {
  double max_t, partial, a, lat;
  int parent;  // arena id of the previous stage's label; -1 for the start label
  int first, last, kc;
};

struct Pass {
  Goal goal = Goal::period;
  unsigned dims = kMaxT | kPartial;
  double period_cap = kInf;
  double latency_cap = kInf;
  double energy_ub = kInf;
  int max_group = 1 << 30;  // largest device count per stage considered (a restricted pre-pass)
};

inline bool dominates(const Label& x, const Label& y, unsigned dims) {
  return (!(dims & kMaxT) || x.max_t <= y.max_t) && (!(dims & kPartial) || x.partial <= y.partial) &&
         (!(dims & kA) || x.a <= y.a) && (!(dims & kLat) || x.lat <= y.lat);
}

class LabelDp {
 public:
  // Pruning bounds (below), kept apart so that passes over the same tables and period cap can
  // share them: the energy bounds do not depend on the caps, the completion bounds on the cap.
  struct Bounds {
    std::vector<double> w_delta, v_delta, rest_period;  // energy
    double cap = kInf;
    std::vector<double> q, r;  // completion under `cap`
  };

  LabelDp(const CostTables& t, const Pass& pass, Bounds* shared = nullptr)
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

  struct Final {
    int id = -1;
    double period = kInf, energy = kInf, latency = kInf;
    int devices = 0;
  };

  // Every label that reached the end, with its figures.
  std::vector<Final> finals() const {
    std::vector<Final> out;
    for (int u = 0; u < u_.size; ++u) {
      for (int kc = 0; kc < kcs_; ++kc) {
        for (int id : lists_[state(n_, u, kc)]) {
          const Label& l = arena_[id];
          Final f;
          f.id = id;
          f.period = std::max(l.max_t, l.partial);
          f.energy = l.a + f.period * u_.idle_w[u];
          f.latency = l.lat;
          f.devices = u_.devices[u];
          if (!within(f.period, pass_.period_cap) || !within(f.latency, pass_.latency_cap)) continue;
          out.push_back(f);
        }
      }
    }
    return out;
  }

  Final best() const {
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

  std::vector<StageSpec> stages(int id) const {
    std::vector<StageSpec> out;
    for (; id >= 0 && arena_[id].kc >= 0; id = arena_[id].parent) {
      out.push_back({arena_[id].first, arena_[id].last, arena_[id].kc});
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

  std::size_t labels() const { return arena_.size(); }

 private:
  std::size_t state(int i, int u, int kc) const {
    return (static_cast<std::size_t>(i) * u_.size + u) * kcs_ + kc;
  }

  // Lower bounds on what a label still adds to its final energy, for pruning against a known
  // plan's energy. The final figure is E = a + (open stage's X_out share) + sum over later stages
  // of c (dE C + dX (X_in + X_out)) + P B(u_final), with d = above idle; as P >= every later
  // stage's own time T = X_in + C + X_out and P >= the label's own M = max(max_t, partial, the
  // period the rest forces), P B(u_final) >= M B(u) + sum over later stages of c p_idle T, so
  //   E >= a + M B(u) + [c_open dX_open X_out + sum later c (p_exec C + p_xfer (X_in + X_out))].
  // The bracket's minimum over completions that fit in the devices left is an exact backward DP
  // over the label states (about one PeriodSearch check's cost); it counts transfers and device
  // limits, so it is far tighter than per-kernel bounds, and kInf where nothing completes:
  //  w_delta(i, u, kc): a label whose open stage on kc ended at i - 1;
  //  v_delta(i, u, kc): a stage being opened at i on kc (devices in u; it pays c dE C, its own
  //    idle share is in M B(u));
  //  rest_period[i]: the period kernels [i, n) force: each runs in some stage, and when stages
  //    only grow (ranges_grow) that stage takes at least the kernel's fastest single-kernel time.
  // Needs p_exec, p_xfer >= p_idle (SystemSpec::validate).
  void rest_energy_lb() {
    b_->rest_period.assign(static_cast<std::size_t>(n_ + 1), 0.0);
    for (int i = n_ - 1; i >= 0; --i) {
      double fastest = kInf;
      for (int kc = 0; kc < kcs_; ++kc) fastest = std::min(fastest, t_.compute(i, i, kc));
      b_->rest_period[i] = std::max(b_->rest_period[i + 1], t_.ranges_grow() && fastest < kInf ? fastest : 0.0);
    }
    const std::size_t states = static_cast<std::size_t>(n_ + 1) * u_.size * kcs_;
    std::vector<double> w_full(states, kInf);  // as w_delta, the source stage paying full p_xfer
    b_->w_delta.assign(states, kInf);
    b_->v_delta.assign(states, kInf);
    std::vector<double> v_full(static_cast<std::size_t>(u_.size) * kcs_);  // later stage opened at i
    std::fill(w_full.begin() + static_cast<std::ptrdiff_t>(state(n_, 0, 0)), w_full.end(), 0.0);
    std::fill(b_->w_delta.begin() + static_cast<std::ptrdiff_t>(state(n_, 0, 0)), b_->w_delta.end(), 0.0);
    std::vector<double> exec_f(kcs_), exec_d(kcs_), xfer_f(kcs_), xfer_d(kcs_);
    for (int kc = 0; kc < kcs_; ++kc) {
      const DeviceGroup g = t_.group(kc);
      const PowerStates& p = t_.power(g.kind);
      exec_f[kc] = g.count * p.exec_w;
      exec_d[kc] = g.count * (p.exec_w - p.idle_w);
      xfer_f[kc] = g.count * p.xfer_w;
      xfer_d[kc] = g.count * (p.xfer_w - p.idle_w);
    }
    std::vector<double> cf(kcs_), cd(kcs_), xt(static_cast<std::size_t>(kcs_) * kcs_);
    // Innermost loops run over kc, contiguous in the tables, so they vectorise; entries of usages
    // that lack kc's own devices are computed too but never read.
    for (int i = n_ - 1; i >= 0; --i) {
      std::fill(v_full.begin(), v_full.end(), kInf);
      double* vd_i = &b_->v_delta[state(i, 0, 0)];
      for (int j = i + 1, end = last_range_end(i, kInf); j <= end; ++j) {
        for (int kc = 0; kc < kcs_; ++kc) {
          const double c = t_.compute(i, j - 1, kc);
          cf[kc] = c < kInf ? exec_f[kc] * c : kInf;  // 0 * inf would be NaN
          cd[kc] = c < kInf ? exec_d[kc] * c : kInf;
        }
        const double* wf_j = &w_full[state(j, 0, 0)];
        const double* wd_j = &b_->w_delta[state(j, 0, 0)];
        for (int u = 0; u < u_.size; ++u) {
          const std::size_t o = static_cast<std::size_t>(u) * kcs_;
          for (int kc = 0; kc < kcs_; ++kc) {
            v_full[o + kc] = std::min(v_full[o + kc], cf[kc] + wf_j[o + kc]);
            vd_i[o + kc] = std::min(vd_i[o + kc], cd[kc] + wd_j[o + kc]);
          }
        }
      }
      if (i == 0) break;
      transposed_transfers(i - 1, xt);
      double* wf_i = &w_full[state(i, 0, 0)];
      double* wd_i = &b_->w_delta[state(i, 0, 0)];
      for (int u = 0; u < u_.size; ++u) {
        double* wf = wf_i + static_cast<std::size_t>(u) * kcs_;
        double* wd = wd_i + static_cast<std::size_t>(u) * kcs_;
        const int* next = &u_.next[static_cast<std::size_t>(u) * kcs_];
        for (int k2 = 0; k2 < kcs_; ++k2) {
          if (next[k2] < 0) continue;
          const double v = v_full[static_cast<std::size_t>(next[k2]) * kcs_ + k2];
          if (!(v < kInf)) continue;
          const double* x = &xt[static_cast<std::size_t>(k2) * kcs_];
          const double in_w = xfer_f[k2];
          for (int kc = 0; kc < kcs_; ++kc) {
            const double rest = in_w * x[kc] + v;
            wf[kc] = std::min(wf[kc], xfer_f[kc] * x[kc] + rest);
            wd[kc] = std::min(wd[kc], xfer_d[kc] * x[kc] + rest);
          }
        }
      }
    }
  }

  // Backward pass for a period cap P: from the end, the largest open-stage value each state can
  // carry and still be completed with every later stage within P on the devices left:
  //   q(i, u, kc): a label there (open stage on kc, kernels [0, i) done) needs partial <= q;
  //   r(i, u, kc): a stage opened at i on kc (u counting its devices) needs its transfer-in <= r.
  // q(n, .) = P; r(i, u, kc) = max_j q(j, u, kc) - C(i, j - 1, kc); q(i, u, kc) = P - the
  // smallest X(i - 1, kc, kc') <= r(i, u + kc', kc'). A label over these bounds has no completion
  // under the cap, so dropping it loses nothing; the cap is widened by 1e-8 relative (far above
  // summation-order rounding, so the forward within() tests can never accept what this rejected).
  // Costs about one PeriodSearch check; in the perf tie-break pass at P* nearly every label fails.
  void completion_bounds() {
    const double cap = pass_.period_cap * (1 + 1e-8);
    const std::size_t row = static_cast<std::size_t>(u_.size) * kcs_;
    const std::size_t states = static_cast<std::size_t>(n_ + 1) * row;
    b_->q.assign(states, -kInf);
    b_->r.assign(states, -kInf);
    std::fill(b_->q.begin() + static_cast<std::ptrdiff_t>(state(n_, 0, 0)), b_->q.end(), cap);
    std::vector<double> cost(kcs_), xt(static_cast<std::size_t>(kcs_) * kcs_), best(kcs_);
    // Loops run over (u, kc) innermost, contiguous in the tables, so they vectorise; entries of
    // usages that lack kc's own devices are computed too but never read.
    for (int i = n_ - 1; i >= 0; --i) {
      for (int j = i + 1, end = last_range_end(i, cap); j <= end; ++j) {
        for (int kc = 0; kc < kcs_; ++kc) {
          const double c = t_.compute(i, j - 1, kc);
          cost[kc] = c <= cap ? c : kInf;
        }
        for (int u = 0; u < u_.size; ++u) {
          const double* q = &b_->q[state(j, u, 0)];
          double* r = &b_->r[state(i, u, 0)];
          for (int kc = 0; kc < kcs_; ++kc) r[kc] = std::max(r[kc], q[kc] - cost[kc]);
        }
      }
      if (i == 0) break;
      transposed_transfers(i - 1, xt);
      for (int u = 0; u < u_.size; ++u) {
        std::fill(best.begin(), best.end(), kInf);
        const int* next = &u_.next[static_cast<std::size_t>(u) * kcs_];
        for (int k2 = 0; k2 < kcs_; ++k2) {
          if (next[k2] < 0) continue;
          const double room = b_->r[state(i, next[k2], k2)];
          const double* x = &xt[static_cast<std::size_t>(k2) * kcs_];
          for (int kc = 0; kc < kcs_; ++kc) best[kc] = x[kc] <= room ? std::min(best[kc], x[kc]) : best[kc];
        }
        double* q = &b_->q[state(i, u, 0)];
        for (int kc = 0; kc < kcs_; ++kc) q[kc] = best[kc] < kInf ? cap - best[kc] : -kInf;
      }
    }
  }

  // The last j such that a stage [i, j - 1] can still fit within `cap` on some group (n when
  // ranges need not grow).
  int last_range_end(int i, double cap) const {
    if (!t_.ranges_grow()) return n_;
    int end = i;
    for (int j = i + 1; j <= n_; ++j) {
      bool any = false;
      for (int kc = 0; kc < kcs_ && !any; ++kc) {
        const double c = t_.compute(i, j - 1, kc);
        any = c < kInf && c <= cap;
      }
      if (!any) break;
      end = j;
    }
    return end;
  }

  // xt[k2 * kcs + kc] = transfer(k, kc, k2).
  void transposed_transfers(int k, std::vector<double>& xt) const {
    for (int kc = 0; kc < kcs_; ++kc) {
      for (int k2 = 0; k2 < kcs_; ++k2) xt[static_cast<std::size_t>(k2) * kcs_ + kc] = t_.transfer(k, kc, k2);
    }
  }

  // Whether a label for kernels [0, i) can still lead to an admissible plan. The caps' tests are
  // monotone in the open stage's compute time: a stage that fails them cannot pass by growing.
  bool within_caps(const Label& l) const {
    return within(l.partial, pass_.period_cap) && within(l.max_t, pass_.period_cap) &&
           within(l.lat, pass_.latency_cap);
  }

  // opening: the label opens a stage at i on devices already in u.
  bool keep(const Label& l, int u, int i, int kc, bool opening = false) const {
    if (!within_caps(l)) return false;
    if (pass_.energy_ub < kInf) {
      const double rest = opening ? b_->v_delta[state(i, u, kc)] : b_->w_delta[state(i, u, kc)];
      const double lb = l.a + rest + std::max({l.max_t, l.partial, b_->rest_period[i]}) * u_.idle_w[u];
      if (!within(lb, pass_.energy_ub)) return false;
    }
    return true;
  }

  static bool insert(std::vector<Label>& set, const Label& cand, unsigned dims) {
    for (const Label& l : set) {
      if (dominates(l, cand, dims)) return false;
    }
    std::erase_if(set, [&](const Label& l) { return dominates(cand, l, dims); });
    set.push_back(cand);
    return true;
  }

  void insert_state(std::size_t s, const Label& cand) {
    std::vector<int>& list = lists_[s];
    for (int id : list) {
      if (dominates(arena_[id], cand, pass_.dims)) return;
    }
    std::erase_if(list, [&](int id) { return dominates(cand, arena_[id], pass_.dims); });
    list.push_back(static_cast<int>(arena_.size()));
    arena_.push_back(cand);
  }

  void run() {
    arena_.push_back({0, 0, 0, 0, -1, -1, -1, -1});  // the empty pipeline
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
            if (!use_q_ || b_->r[state(0, u2, kc)] >= 0) opening.push_back({0, 0, 0, 0, 0, 0, 0, kc});
          } else {
            for (int kp : live_kp) {
              const DeviceGroup gp = t_.group(kp);
              const PowerStates& pp = t_.power(gp.kind);
              const double xfer_wp = gp.count * (pp.xfer_w - pp.idle_w);
              const double x = t_.transfer(ip - 1, kp, kc);
              for (int id : lists_[state(ip, u1, kp)]) {
                const Label& l = arena_[id];
                Label o{std::max(l.max_t, l.partial + x), x, l.a + (xfer_wp + xfer_w) * x, l.lat + x,
                        id, 0, 0, kc};
                if (!keep(o, u2, ip, kc, true) || (use_q_ && x > b_->r[state(ip, u2, kc)])) continue;
                insert(opening, o, pass_.dims);
              }
            }
          }
          if (opening.empty()) continue;
          // Step 2: the new stage runs kernels [ip, i - 1].
          const double exec_w = g.count * (p.exec_w - p.idle_w);
          const bool grow = t_.ranges_grow();
          for (int i = ip + 1; i <= n_; ++i) {
            const double c = t_.compute(ip, i - 1, kc);
            if (!(c < kInf)) {
              if (grow) break;
              continue;
            }
            const std::size_t s = state(i, u2, kc);
            bool capped = true;
            for (const Label& o : opening) {
              Label l{o.max_t, o.partial + c, o.a + exec_w * c, o.lat + c, o.parent, ip, i - 1, kc};
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

  const CostTables& t_;
  Usage u_;
  Pass pass_;
  int n_ = 0;
  int kcs_ = 0;
  std::vector<Label> arena_;
  std::vector<std::vector<int>> lists_;
  Bounds own_;
  Bounds* b_;
  bool use_q_ = false;
};

struct Found {
  std::vector<StageSpec> stages;
  Figures fig;
  bool ok = false;
};

Found run_pass(const CostTables& t, const Pass& pass, LabelDp::Bounds* shared = nullptr) {
  LabelDp dp(t, pass, shared);
  const auto b = dp.best();
  Found f;
  if (b.id < 0) return f;
  f.stages = dp.stages(b.id);
  f.fig = figures(f.stages, t);
  f.ok = true;
  return f;
}

// ---------------------------------------------------------------------------------------------
// Exact min-period search (the perf pass when no latency cap applies).
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
// ---------------------------------------------------------------------------------------------
class PeriodSearch {
 public:
  // Relative margin of the "below the best period" probe: far above summation-order rounding (so
  // the check's sums and figures()' cannot disagree across it), far below any real difference.
  static constexpr double kBelow = 1e-12;
  static constexpr double kNarrow = 1e-3;  // bisect until hi - lo <= kNarrow * hi

  explicit PeriodSearch(const CostTables& t) : t_(t), u_(t) {
    n_ = t.num_kernels();
    kcs_ = t.num_kc();
    const std::size_t states = static_cast<std::size_t>(n_ + 1) * u_.size * kcs_;
    part_.resize(states);
    pip_.resize(states);
    pkp_.resize(states);
    live_.resize(static_cast<std::size_t>(n_ + 1) * u_.size);
  }

  Found run(double hi_bound) {
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

 private:
  struct Check {
    bool ok = false;
    double v_min = kInf;
    Found found;
  };

  std::size_t state(int i, int u, int kc) const { return (static_cast<std::size_t>(i) * u_.size + u) * kcs_ + kc; }

  Check check(double p_max) {
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
            best_x = 0;
          } else {
            for (int kp : live_kp_) {
              const double x = t_.transfer(ip - 1, kp, kc);
              const double done = prev[kp] + x;
              if (done > p_max) {
                v_min = std::min(v_min, done);
                continue;
              }
              if (x < best_x) {
                best_x = x;
                best_kp = kp;
              }
            }
            if (!(best_x < kInf)) continue;
          }
          for (int i = ip + 1; i <= n_; ++i) {
            const double v = best_x + t_.compute(ip, i - 1, kc);
            if (!(v < kInf)) {
              if (grow) break;
              continue;
            }
            if (v > p_max) {
              v_min = std::min(v_min, v);
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
    r.v_min = v_min;
    std::size_t end = 0;
    double best = kInf;
    for (int u = 0; u < u_.size; ++u) {
      for (int kc = 0; kc < kcs_; ++kc) {
        const std::size_t s = state(n_, u, kc);
        if (part_[s] < best) {
          best = part_[s];
          end = s;
        }
      }
    }
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
  void drop_dominated_usage(int i) {
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

  const CostTables& t_;
  Usage u_;
  int n_ = 0;
  int kcs_ = 0;
  std::vector<double> best_below_;
  std::vector<double> part_;
  std::vector<int> pip_;
  std::vector<int> pkp_;
  std::vector<char> live_;  // [i][u]: some state (i, u, *) is reachable under the bound
  std::vector<int> live_kp_;
};

// Best single-stage plan under the caps: a cheap feasible plan whose energy bounds the search.
double seed_energy(const CostTables& t, double period_cap, double latency_cap) {
  double best = kInf;
  for (int kc = 0; kc < t.num_kc(); ++kc) {
    const double c = t.compute(0, t.num_kernels() - 1, kc);
    if (!(c < kInf) || !within(c, period_cap) || !within(c, latency_cap)) continue;
    const DeviceGroup g = t.group(kc);
    best = std::min(best, g.count * t.power(g.kind).exec_w * c);
  }
  return best;
}

void require_schedulable(const CostTables& t) {
  for (int k = 0; k < t.num_kernels(); ++k) {
    bool any = false;
    for (int kc = 0; kc < t.num_kc() && !any; ++kc) any = t.compute(k, k, kc) < kInf;
    if (!any) {
      throw InfeasibleError("no device kind available to the scheduler can run kernel " + std::to_string(k));
    }
  }
}

void check_objective(const ObjectiveSpec& o) {
  if (!(o.balance_ratio > 0 && o.balance_ratio <= 1)) {
    throw InputError("objective.balance_ratio", "must be in (0, 1], got " + std::to_string(o.balance_ratio));
  }
  if (!(o.min_throughput_per_s >= 0)) throw InputError("objective.min_throughput_per_s", "must be >= 0");
  if (!(o.max_latency_s > 0)) throw InputError("objective.max_latency_s", "must be > 0");
}

struct Caps {
  double period = kInf;
  double latency = kInf;
};

// 100 (v - ref) / base, base defaulting to ref.
std::string percent(double v, double ref, double base = 0.0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * (v - ref) / (base != 0.0 ? base : ref));
  return buf;
}

// Diagnoses an infeasible qos target: which constraint, and by how much.
[[noreturn]] void qos_infeasible(const CostTables& t, const ObjectiveSpec& o) {
  const unsigned lat = o.max_latency_s < kInf ? unsigned{kLat} : 0u;
  const Found fastest = run_pass(t, {Goal::period, kMaxT | kPartial, kInf, kInf, kInf});
  const double want_p = o.min_throughput_per_s > 0 ? 1.0 / o.min_throughput_per_s : kInf;
  if (o.min_throughput_per_s > 0 && !within(fastest.fig.period, want_p)) {
    throw InfeasibleError("qos: min throughput " + fmt(o.min_throughput_per_s, "/s") +
                          " infeasible: best achievable " + fmt(1.0 / fastest.fig.period, "/s") +
                          " (short of the target by " +
                          percent(o.min_throughput_per_s, 1.0 / fastest.fig.period, o.min_throughput_per_s) + ")");
  }
  const Found quickest = run_pass(t, {Goal::latency, kLat, kInf, kInf, kInf});
  if (!within(quickest.fig.latency, o.max_latency_s)) {
    throw InfeasibleError("qos: max latency " + fmt(o.max_latency_s, "s") + " infeasible: lowest achievable " +
                          fmt(quickest.fig.latency, "s") + " (over by " +
                          percent(quickest.fig.latency, o.max_latency_s) + ")");
  }
  const Found joint = run_pass(t, {Goal::latency, kMaxT | kPartial | lat, want_p, kInf, kInf});
  throw InfeasibleError("qos: targets jointly infeasible: with throughput >= " +
                        fmt(o.min_throughput_per_s, "/s") + " the lowest latency is " +
                        fmt(joint.ok ? joint.fig.latency : kInf, "s") + " > max latency " +
                        fmt(o.max_latency_s, "s"));
}

Found solve_exact(const CostTables& t, const ObjectiveSpec& o, Caps& caps) {
  const unsigned lat = o.objective == Objective::qos && o.max_latency_s < kInf ? unsigned{kLat} : 0u;
  caps.latency = lat ? o.max_latency_s : kInf;
  auto fastest = [&](double latency_cap) {
    // Any single-stage plan's period bounds the optimum from above.
    double ub = kInf;
    for (int kc = 0; kc < t.num_kc(); ++kc) {
      const double c = t.compute(0, t.num_kernels() - 1, kc);
      if (within(c, latency_cap)) ub = std::min(ub, c);
    }
    if (!(latency_cap < kInf)) return PeriodSearch(t).run(ub);
    return run_pass(t, {Goal::period, kMaxT | kPartial | lat, ub, latency_cap, kInf});
  };
  auto cheapest = [&](double period_cap, double ub) {
    // The best plan with one device per stage is found fast (few groups, few labels) and its
    // energy bounds the full search, which then prunes most multi-device labels.
    LabelDp::Bounds bounds;
    Found one;
    std::size_t states = static_cast<std::size_t>(t.num_kernels() + 1) * t.num_kc();
    for (int c : t.max_counts()) states *= static_cast<std::size_t>(c) + 1;  // usage vectors
    if (period_cap < kInf && states >= 1024) {
      // Without the period cap a single-stage plan bounds that search from its first label (under
      // the cap often none fits), so it runs much faster; its plan, when it meets the cap, serves.
      // Below ~1k label states the capped search takes microseconds and this pass would dominate.
      const double free_ub = std::min(ub, seed_energy(t, kInf, caps.latency));
      Found free = run_pass(t, {Goal::energy, kMaxT | kPartial | kA | lat, kInf, caps.latency, free_ub, 1}, &bounds);
      if (free.ok && within(free.fig.period, period_cap)) one = std::move(free);
    }
    ub = std::min(ub, seed_energy(t, period_cap, caps.latency));
    if (!one.ok) one = run_pass(t, {Goal::energy, kMaxT | kPartial | kA | lat, period_cap, caps.latency, ub, 1}, &bounds);
    if (one.ok) ub = std::min(ub, one.fig.energy);
    const Found all = run_pass(t, {Goal::energy, kMaxT | kPartial | kA | lat, period_cap, caps.latency, ub}, &bounds);
    return all.ok ? all : one;
  };
  switch (o.objective) {
    case Objective::perf: {
      const Found p = fastest(caps.latency);
      if (!p.ok) return p;
      caps.period = p.fig.period;
      // Among the fastest plans, the one that uses least energy. The period is pinned to P*, so
      // E = a + P* B(u) and max_t drops out of the dominance test.
      Found e = run_pass(t, {Goal::energy, kPartial | kA | lat, caps.period, caps.latency,
                             std::min(p.fig.energy, seed_energy(t, caps.period, caps.latency))});
      return e.ok ? e : p;
    }
    case Objective::energy: return cheapest(kInf, kInf);
    case Objective::balanced: {
      const Found p = fastest(caps.latency);
      if (!p.ok) return p;
      caps.period = p.fig.period / o.balance_ratio;
      Found e = cheapest(caps.period, p.fig.energy);
      return e.ok ? e : p;
    }
    case Objective::qos: {
      caps.period = o.min_throughput_per_s > 0 ? 1.0 / o.min_throughput_per_s : kInf;
      Found e = cheapest(caps.period, kInf);
      if (!e.ok) qos_infeasible(t, o);
      return e;
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Algorithm 1 of the paper, generalised from (f, g) to a usage vector over any number of kinds:
// dp_perf[i][u] and dp_eng[i][u] each keep ONE schedule, chosen by the partial pipeline's period
// (its last stage without the transfer it will later send) or its energy at that period.
// ---------------------------------------------------------------------------------------------
Found solve_paper(const CostTables& t, const ObjectiveSpec& o, Caps& caps) {
  const Usage us(t);
  const int n = t.num_kernels();
  struct Entry {
    std::vector<StageSpec> stages;
    double value = kInf;
    bool ok = false;
  };
  std::vector<Entry> dp_perf(static_cast<std::size_t>(n + 1) * us.size);
  std::vector<Entry> dp_eng(dp_perf.size());
  dp_perf[0].ok = dp_eng[0].ok = true;
  dp_perf[0].value = dp_eng[0].value = 0;
  std::vector<StageSpec> cand;
  for (int i = 1; i <= n; ++i) {
    for (int u2 = 0; u2 < us.size; ++u2) {
      for (int j = 1; j <= i; ++j) {
        const int ip = i - j;
        for (int kc = 0; kc < t.num_kc(); ++kc) {
          const DeviceGroup g = t.group(kc);
          if (us.digits[u2][g.kind] < g.count) continue;
          if (!(t.compute(ip, i - 1, kc) < kInf)) continue;
          const int u1 = u2 - g.count * us.stride[g.kind];
          for (int table = 0; table < 2; ++table) {
            auto& dp = table == 0 ? dp_perf : dp_eng;
            const Entry& prev = dp[static_cast<std::size_t>(ip) * us.size + u1];
            if (!prev.ok) continue;
            cand = prev.stages;
            cand.push_back({ip, i - 1, kc});
            const Figures f = figures(cand, t);
            const double v = table == 0 ? f.period : f.energy;
            Entry& cur = dp[static_cast<std::size_t>(i) * us.size + u2];
            if (!cur.ok || cur.value > v) cur = {cand, v, true};
          }
        }
      }
    }
  }
  // Review dp[|wl|][u] over every u (and both tables), as the paper does for its trade-offs.
  std::vector<Found> all;
  for (int u = 0; u < us.size; ++u) {
    for (const auto* dp : {&dp_perf, &dp_eng}) {
      const Entry& e = (*dp)[static_cast<std::size_t>(n) * us.size + u];
      if (e.ok) all.push_back({e.stages, figures(e.stages, t), true});
    }
  }
  Found best;
  auto take_min = [&](auto key, auto ok) {
    for (const Found& f : all) {
      if (ok(f) && (!best.ok || key(f) < key(best))) best = f;
    }
  };
  auto energy = [](const Found& f) { return f.fig.energy; };
  auto any = [](const Found&) { return true; };
  double p_best = kInf;
  for (const Found& f : all) p_best = std::min(p_best, f.fig.period);
  switch (o.objective) {
    case Objective::perf: {
      take_min([](const Found& f) { return f.fig.period; }, any);
      break;
    }
    case Objective::energy: take_min(energy, any); break;
    case Objective::balanced:
      caps.period = p_best / o.balance_ratio;
      take_min(energy, [&](const Found& f) { return within(f.fig.period, caps.period); });
      break;
    case Objective::qos: {
      caps.period = o.min_throughput_per_s > 0 ? 1.0 / o.min_throughput_per_s : kInf;
      caps.latency = o.max_latency_s;
      take_min(energy, [&](const Found& f) {
        return within(f.fig.period, caps.period) && within(f.fig.latency, caps.latency);
      });
      if (!best.ok) {
        throw InfeasibleError(std::string("qos (paper solver): no schedule in dp[|wl|] meets the targets; ") +
                              "best throughput " + fmt(1.0 / p_best, "/s"));
      }
      break;
    }
  }
  return best;
}

double score_of(const Figures& f, Objective o) {
  return o == Objective::perf ? f.period : f.energy;
}

void explain_with(Plan& plan, const CostTables& t, Objective obj, const Caps& caps) {
  std::vector<StageSpec> specs;
  for (const Stage& s : plan.stages) specs.push_back({s.first, s.last, t.kc({s.kind, s.count})});
  std::vector<int> used(t.num_kinds(), 0);
  for (const Stage& s : plan.stages) used[s.kind] += s.count;
  const bool perf = obj == Objective::perf;
  const char* unit = perf ? "s period" : "J/inference";
  const double own = perf ? plan.period_s : plan.energy_j;
  for (std::size_t s = 0; s < specs.size(); ++s) {
    const StageSpec mine = specs[s];
    const DeviceGroup g = t.group(mine.kc);
    Stage& st = plan.stages[s];
    double best = kInf;
    std::string best_name;
    for (int kc = 0; kc < t.num_kc(); ++kc) {
      if (kc == mine.kc) continue;
      const DeviceGroup a = t.group(kc);
      if (used[a.kind] - (a.kind == g.kind ? g.count : 0) + a.count > t.max_count(a.kind)) continue;
      specs[s].kc = kc;
      const Figures f = figures(specs, t);
      double sc = score_of(f, obj);
      if (!(f.period < kInf) || !within(f.period, caps.period) || !within(f.latency, caps.latency)) sc = kInf;
      if (best_name.empty() || sc < best) {
        best = sc;
        best_name = std::to_string(a.count) + "x" + t.kind_name(a.kind);
      }
    }
    specs[s] = mine;
    const std::string me = std::to_string(g.count) + "x" + t.kind_name(g.kind);
    st.runner_up = best_name;
    st.runner_up_score = best;
    if (best_name.empty()) {
      st.why = me + ": the only (kind, count) that fits beside the other stages";
    } else if (!(best < kInf)) {
      st.why = me + ": " + fmt(own, unit) + "; every alternative, e.g. " + best_name +
               ", cannot run these kernels or breaks a constraint";
    } else {
      st.why = me + ": " + fmt(own, unit) + "; runner-up " + best_name + ": " + fmt(best, unit) + " (+" +
               percent(best, own) + ")";
    }
  }
}

Plan finish(const Found& f, const CostTables& t, const ObjectiveSpec& o, SolverKind solver, const Caps& caps,
            std::chrono::steady_clock::time_point start) {
  Plan plan = evaluate(f.stages, t);
  plan.objective = to_string(o.objective);
  plan.solver = to_string(solver);
  plan.score = o.objective == Objective::perf ? plan.period_s : plan.energy_j;
  explain_with(plan, t, o.objective, caps);
  plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace

Plan solve(const CostTables& tables, const ObjectiveSpec& objective, SolverKind solver) {
  const auto start = std::chrono::steady_clock::now();
  check_objective(objective);
  require_schedulable(tables);
  Caps caps;
  const Found f = solver == SolverKind::exact ? solve_exact(tables, objective, caps)
                                              : solve_paper(tables, objective, caps);
  if (!f.ok) throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
  return finish(f, tables, objective, solver, caps, start);
}

Plan solve(const SystemSpec& system, const CostModel& model, const ObjectiveSpec& objective,
           SolverKind solver, const SpaceLimits& limits) {
  const auto start = std::chrono::steady_clock::now();
  const CostTables tables(system, model, limits);
  Plan plan = solve(tables, objective, solver);
  plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

void explain(Plan& plan, const CostTables& tables, const ObjectiveSpec& objective) {
  Caps caps;
  if (objective.objective == Objective::balanced) {
    Caps ignore;
    caps.period = solve_exact(tables, {Objective::perf}, ignore).fig.period / objective.balance_ratio;
  } else if (objective.objective == Objective::qos) {
    caps.period = objective.min_throughput_per_s > 0 ? 1.0 / objective.min_throughput_per_s : kInf;
    caps.latency = objective.max_latency_s;
  }
  explain_with(plan, tables, objective.objective, caps);
}

std::vector<Plan> pareto_front(const CostTables& tables) {
  require_schedulable(tables);
  LabelDp dp(tables, {Goal::energy, kMaxT | kPartial | kA, kInf, kInf, kInf});
  auto finals = dp.finals();
  std::sort(finals.begin(), finals.end(), [](const auto& a, const auto& b) {
    if (a.period != b.period) return a.period < b.period;
    if (a.energy != b.energy) return a.energy < b.energy;
    return a.devices < b.devices;
  });
  std::vector<Plan> front;
  std::vector<LabelDp::Final> kept;
  for (const auto& f : finals) {
    // Sorted by period, so only earlier (faster or equal) points can dominate f.
    bool dominated = false;
    for (const auto& k : kept) {
      if (k.energy <= f.energy && k.devices <= f.devices) {
        dominated = true;
        break;
      }
    }
    if (dominated) continue;
    kept.push_back(f);
    Plan p = evaluate(dp.stages(f.id), tables);
    p.objective = "pareto";
    p.solver = "exact";
    p.score = p.energy_j;
    front.push_back(std::move(p));
  }
  return front;
}

std::vector<EnumeratedPlan> enumerate_plans(const CostTables& t) {
  std::vector<EnumeratedPlan> out;
  std::vector<StageSpec> cur;
  std::vector<int> used(t.num_kinds(), 0);
  const int n = t.num_kernels();
  std::function<void(int)> rec = [&](int pos) {
    if (pos == n) {
      const Figures f = figures(cur, t);
      out.push_back({cur, f.period, f.latency, f.energy, f.devices});
      return;
    }
    for (int last = pos; last < n; ++last) {
      for (int kc = 0; kc < t.num_kc(); ++kc) {
        const DeviceGroup g = t.group(kc);
        if (used[g.kind] + g.count > t.max_count(g.kind)) continue;
        if (!(t.compute(pos, last, kc) < kInf)) continue;
        used[g.kind] += g.count;
        cur.push_back({pos, last, kc});
        rec(last + 1);
        cur.pop_back();
        used[g.kind] -= g.count;
      }
    }
  };
  rec(0);
  return out;
}

EnumeratedPlan best_of(const std::vector<EnumeratedPlan>& all, const ObjectiveSpec& o) {
  EnumeratedPlan none{{}, kInf, kInf, kInf, 0};
  double p_best = kInf;
  for (const auto& p : all) p_best = std::min(p_best, p.period_s);
  double pcap = kInf, lcap = kInf;
  if (o.objective == Objective::balanced) pcap = p_best / o.balance_ratio;
  if (o.objective == Objective::qos) {
    pcap = o.min_throughput_per_s > 0 ? 1.0 / o.min_throughput_per_s : kInf;
    lcap = o.max_latency_s;
  }
  const EnumeratedPlan* best = nullptr;
  for (const auto& p : all) {
    if (!within(p.period_s, pcap) || !within(p.latency_s, lcap)) continue;
    const double key = o.objective == Objective::perf ? p.period_s : p.energy_j;
    if (!best || key < (o.objective == Objective::perf ? best->period_s : best->energy_j)) best = &p;
  }
  return best ? *best : none;
}

}  // namespace dype::sched
