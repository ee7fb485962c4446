// The label DP's pruning bounds (see label_dp.h): backward passes over the same states that say,
// for each state, how much energy any completion still adds at least and how long an open stage
// may grow and still complete under a period cap. Both are exact DPs, so pruning by them loses
// no optimum.
#include <algorithm>

#include "scheduler/solver/label_dp.h"

namespace dype::sched::detail {

// Lower bounds on what a label still adds to its final energy, for pruning against a known
// plan's energy (X_out: the sending stage's side of a hand-off, X_in: the receiving one's). The
// final figure is E = a + (open stage's X_out share) + sum over later stages
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
void LabelDp::rest_energy_lb() {
  b_->rest_period.assign(static_cast<std::size_t>(n_ + 1), 0.0);
  for (int i = n_ - 1; i >= 0; --i) {
    // Overlapping transfers: a stage takes at least the largest of its kernels and each copy
    // direction.
    double fastest = kInf;
    for (int kc = 0; kc < kcs_; ++kc)
      fastest = std::min(fastest, std::max(t_.alone(0.0, i, i, kc), t_.carried(0.0, i, i, kc)));
    b_->rest_period[i] = std::max(b_->rest_period[i + 1], t_.ranges_grow() && fastest < kInf ? fastest : 0.0);
  }
  const std::size_t states = static_cast<std::size_t>(n_ + 1) * u_.size * kcs_;
  std::vector<double> w_full(states, kInf);  // as w_delta, the source stage paying full p_xfer
  b_->w_delta.assign(states, kInf);
  b_->v_delta.assign(states, kInf);
  std::vector<double> v_full(static_cast<std::size_t>(u_.size) * kcs_);  // later stage opened at i
  std::fill(w_full.begin() + static_cast<std::ptrdiff_t>(state(n_, 0, 0)), w_full.end(), 0.0);
  std::fill(b_->w_delta.begin() + static_cast<std::ptrdiff_t>(state(n_, 0, 0)), b_->w_delta.end(), 0.0);
  std::vector<double> count(kcs_), xfer_f(kcs_), xfer_d(kcs_);
  for (int kc = 0; kc < kcs_; ++kc) {
    const DeviceGroup g = t_.group(kc);
    const PowerStates& p = t_.power(g.kind);
    count[kc] = g.count;
    // Overlapping transfers: P >= a later stage's kernels or copies, not their sum, so the later
    // stages' idle share is not claimed (full power = the increment above idle).
    xfer_f[kc] = g.count * (t_.overlap() ? p.xfer_w - p.idle_w : p.xfer_w);
    xfer_d[kc] = g.count * (p.xfer_w - p.idle_w);
  }
  std::vector<double> cf(kcs_), cd(kcs_), xt(static_cast<std::size_t>(kcs_) * kcs_), xi(xt.size());
  // Innermost loops run over kc, contiguous in the tables, so they vectorise; entries of usages
  // that lack kc's own devices are computed too but never read.
  for (int i = n_ - 1; i >= 0; --i) {
    std::fill(v_full.begin(), v_full.end(), kInf);
    double* vd_i = &b_->v_delta[state(i, 0, 0)];
    for (int j = i + 1, end = last_range_end(i, kInf); j <= end; ++j) {
      for (int kc = 0; kc < kcs_; ++kc) {
        const double c = t_.compute(i, j - 1, kc);
        const double w = t_.exec_w(i, j - 1, kc);  // per range: kernels draw different power
        const double idle = t_.power(t_.group(kc).kind).idle_w;
        cf[kc] = c < kInf ? count[kc] * (t_.overlap() ? w - idle : w) * c : kInf;  // 0 * inf would be NaN
        cd[kc] = c < kInf ? count[kc] * (w - t_.power(t_.group(kc).kind).idle_w) * c : kInf;
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
    transposed_transfers(i - 1, xt, xi);
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
        const double* x = &xt[static_cast<std::size_t>(k2) * kcs_];  // the source's side
        const double* y = &xi[static_cast<std::size_t>(k2) * kcs_];  // the destination's side
        const double in_w = xfer_f[k2];
        for (int kc = 0; kc < kcs_; ++kc) {
          const double rest = in_w * y[kc] + v;
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
// q(n, .) = P; r(i, u, kc) = max_j of the room a stage [i, j - 1] leaves its transfer-in when it
// may carry q(j, u, kc) (CostTables::room_for_transfer_in: q - C serially; with overlapping
// transfers P - copies_in when its kernels and copies_out fit); q(i, u, kc) = P - the
// smallest X_out(i - 1, kc, kc') over the kc' with X_in(i - 1, kc, kc') <= r(i, u + kc', kc'). A label over these bounds has no completion
// under the cap, so dropping it loses nothing; the cap is widened by 1e-8 relative (far above
// summation-order rounding, so the forward within() tests can never accept what this rejected).
// Costs about one PeriodSearch check; in the perf tie-break pass at P* nearly every label fails.
void LabelDp::completion_bounds() {
  const double cap = pass_.period_cap * (1 + 1e-8);
  const std::size_t row = static_cast<std::size_t>(u_.size) * kcs_;
  const std::size_t states = static_cast<std::size_t>(n_ + 1) * row;
  b_->q.assign(states, -kInf);
  b_->r.assign(states, -kInf);
  std::fill(b_->q.begin() + static_cast<std::ptrdiff_t>(state(n_, 0, 0)), b_->q.end(), cap);
  std::vector<double> cost(kcs_), xt(static_cast<std::size_t>(kcs_) * kcs_), xi(xt.size()), best(kcs_);
  // Loops run over (u, kc) innermost, contiguous in the tables, so they vectorise; entries of
  // usages that lack kc's own devices are computed too but never read.
  for (int i = n_ - 1; i >= 0; --i) {
    for (int j = i + 1, end = last_range_end(i, cap); j <= end; ++j) {
      if (!t_.overlap()) {
        for (int kc = 0; kc < kcs_; ++kc) {
          const double c = t_.compute(i, j - 1, kc);
          cost[kc] = c <= cap ? c : kInf;
        }
        for (int u = 0; u < u_.size; ++u) {
          const double* q = &b_->q[state(j, u, 0)];
          double* r = &b_->r[state(i, u, 0)];
          for (int kc = 0; kc < kcs_; ++kc) r[kc] = std::max(r[kc], q[kc] - cost[kc]);
        }
        continue;
      }
      for (int u = 0; u < u_.size; ++u) {
        const double* q = &b_->q[state(j, u, 0)];
        double* r = &b_->r[state(i, u, 0)];
        for (int kc = 0; kc < kcs_; ++kc) r[kc] = std::max(r[kc], t_.room_for_transfer_in(i, j - 1, kc, q[kc], cap));
      }
    }
    if (i == 0) break;
    transposed_transfers(i - 1, xt, xi);
    for (int u = 0; u < u_.size; ++u) {
      std::fill(best.begin(), best.end(), kInf);
      const int* next = &u_.next[static_cast<std::size_t>(u) * kcs_];
      for (int k2 = 0; k2 < kcs_; ++k2) {
        if (next[k2] < 0) continue;
        const double room = b_->r[state(i, next[k2], k2)];
        const double* x = &xt[static_cast<std::size_t>(k2) * kcs_];
        const double* y = &xi[static_cast<std::size_t>(k2) * kcs_];
        for (int kc = 0; kc < kcs_; ++kc) best[kc] = y[kc] <= room ? std::min(best[kc], x[kc]) : best[kc];
      }
      double* q = &b_->q[state(i, u, 0)];
      for (int kc = 0; kc < kcs_; ++kc) q[kc] = best[kc] < kInf ? cap - best[kc] : -kInf;
    }
  }
}

// The last j such that a stage [i, j - 1] can still fit within `cap` on some group (n when
// ranges need not grow).
int LabelDp::last_range_end(int i, double cap) const {
  if (!t_.ranges_grow()) return n_;
  int end = i;
  for (int j = i + 1; j <= n_; ++j) {
    bool any = false;
    for (int kc = 0; kc < kcs_ && !any; ++kc) {
      const double c = std::max(t_.carried(0.0, i, j - 1, kc), t_.alone(0.0, i, j - 1, kc));
      any = c < kInf && c <= cap;
    }
    if (!any) break;
    end = j;
  }
  return end;
}

// xo[k2 * kcs + kc] = transfer_out(k, kc, k2), xi[...] = transfer_in(k, kc, k2).
void LabelDp::transposed_transfers(int k, std::vector<double>& xo, std::vector<double>& xi) const {
  for (int kc = 0; kc < kcs_; ++kc) {
    for (int k2 = 0; k2 < kcs_; ++k2) {
      xo[static_cast<std::size_t>(k2) * kcs_ + kc] = t_.transfer_out(k, kc, k2);
      xi[static_cast<std::size_t>(k2) * kcs_ + kc] = t_.transfer_in(k, kc, k2);
    }
  }
}

}  // namespace dype::sched::detail
