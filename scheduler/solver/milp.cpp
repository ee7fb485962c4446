#include "scheduler/solver/milp.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include <coin/Cbc_C_Interface.h>

#include "scheduler/solver.h"

namespace dype::sched::detail {

namespace {

// CBC's solver entry point keeps process-wide state (its parameter tables): one solve at a time.
std::mutex& cbc_mutex() {
  static std::mutex m;
  return m;
}

// Debian's Clp factorises through LAPACK, which Debian's OpenBLAS (pthread build) serves with a
// thread per core that spins after every call: on these tiny factorisations that doubled the CPU a
// solve takes (measured: 9 s of system time in 14 s of solves) and nothing got faster. One thread,
// set once, when that OpenBLAS is the one loaded; dype itself does no BLAS through it.
void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
  });
}

struct MilpResult {
  bool ok = false;
  std::vector<StageSpec> stages;
  int columns = 0, rows = 0;
};

// The program's columns: z per (range, group) that can run it, w per (boundary, group pair), P,
// and u per z for energy goals.
class Program {
 public:
  Program(const CostTables& t, Goal goal, const Caps& caps, bool relax = false)
      : t_(t), n_(t.num_kernels()), kcs_(t.num_kc()), relax_(relax) {
    z_.assign(static_cast<std::size_t>(n_) * n_ * kcs_, -1);
    for (int a = 0; a < n_; ++a)
      for (int b = a; b < n_; ++b)
        for (int kc = 0; kc < kcs_; ++kc) {
          const DeviceGroup g = t.group(kc);
          // A recurrent solve pins the ends (CostTables::set_ends): the other groups' entry or exit is kInf.
          const bool ends_ok = (a > 0 || t.entry(kc) < kInf) && (b < n_ - 1 || t.exit(kc) < kInf);
          if (t.compute(a, b, kc) < kInf && g.count <= t.max_count(g.kind) && ends_ok) {
            z_[idx(a, b, kc)] = static_cast<int>(stages_.size());
            stages_.push_back({a, b, kc});
            worst_.push_back(worst_time(stages_.back()));
          }
        }
    // The period's upper bound: the slowest stage in any context, or the cap.
    for (const double w : worst_) p_max_ = std::max(p_max_, w);
    if (caps.period < kInf) p_max_ = std::min(p_max_, caps.period * (1 + 1e-9));
    if (!(p_max_ > 0)) p_max_ = 1;
    // Times enter the program in units of a feasible plan's period (the fastest single stage, when
    // one runs the whole chain) rather than of the slowest stage: near-ties between plans then
    // differ by far more than CBC's tolerances (scaled by the slowest stage, two plans 5e-5 apart
    // came within them and the MILP returned the slower).
    ref_ = p_max_;
    for (int kc = 0; kc < kcs_; ++kc) {
      const int v = z_[idx(0, n_ - 1, kc)];
      if (v >= 0) ref_ = std::min(ref_, worst_[static_cast<std::size_t>(v)]);
    }
    if (!(ref_ > 0)) ref_ = p_max_;
    goal_ = goal;
    caps_ = caps;
  }

  MilpResult solve() {
    MilpResult r;
    if (stages_.empty()) return r;
    m_ = Cbc_newModel();
    Cbc_setLogLevel(m_, 0);
    Cbc_setAllowableGap(m_, 0.0);
    Cbc_setAllowableFractionGap(m_, 0.0);
    // Branch and bound alone proves optimality; CBC's preprocessing, cut generators and primal
    // heuristics cost 3x the solve time on these small programs (measured: 12 against 41 ms a solve).
    Cbc_setParameter(m_, "preprocess", "off");
    Cbc_setParameter(m_, "cuts", "off");
    Cbc_setParameter(m_, "heuristics", "off");
    // Big-M rows (M up to the slowest context over the scaled period) turn a z within the default
    // integer tolerance into period slack; tighter tolerances keep near-ties from flipping.
    Cbc_setParameter(m_, "integerTolerance", "1e-9");
    Cbc_setParameter(m_, "primalTolerance", "1e-10");
    build();
    r.columns = Cbc_getNumCols(m_);
    r.rows = rows_;
    {
      const std::lock_guard<std::mutex> lock(cbc_mutex());
      single_threaded_blas();
      Cbc_solve(m_);
    }
    if (Cbc_isProvenOptimal(m_)) {
      const double* x = Cbc_getColSolution(m_);
      for (std::size_t v = 0; v < stages_.size(); ++v)
        if (x[v] > 0.5) r.stages.push_back(stages_[v]);
      std::sort(r.stages.begin(), r.stages.end(), [](const StageSpec& a, const StageSpec& b) { return a.first < b.first; });
      r.ok = !r.stages.empty();
    }
    Cbc_deleteModel(m_);
    return r;
  }

  // The LP relaxation's optimum in seconds (period, latency goals) or joules (energy): kInf when the
  // relaxation is infeasible, NaN when CLP stopped short of a proof.
  double relaxation() {
    if (stages_.empty()) return kInf;
    m_ = Cbc_newModel();
    Cbc_setLogLevel(m_, 0);
    Cbc_setParameter(m_, "preprocess", "off");
    Cbc_setParameter(m_, "primalTolerance", "1e-10");
    build();
    double v = std::nan("");
    {
      const std::lock_guard<std::mutex> lock(cbc_mutex());
      single_threaded_blas();
      Cbc_solve(m_);
    }
    if (Cbc_isProvenOptimal(m_)) v = Cbc_getObjValue(m_) * (goal_ == Goal::energy ? e_scale_ : ref_);
    else if (Cbc_isProvenInfeasible(m_)) v = kInf;
    Cbc_deleteModel(m_);
    return v;
  }

 private:
  std::size_t idx(int a, int b, int kc) const { return (static_cast<std::size_t>(a) * n_ + b) * kcs_ + kc; }
  int w(int b, int k, int k2) const { return w0_ + (b * kcs_ + k) * kcs_ + k2; }

  double xin(const StageSpec& s, int prev) const { return s.first == 0 ? t_.entry(s.kc) : t_.transfer_in(s.first - 1, prev, s.kc); }
  double xout(const StageSpec& s, int next) const { return s.last == n_ - 1 ? t_.exit(s.kc) : t_.transfer_out(s.last, s.kc, next); }
  int prevs(const StageSpec& s) const { return s.first == 0 ? 1 : kcs_; }  // contexts (one at an end)
  int nexts(const StageSpec& s) const { return s.last == n_ - 1 ? 1 : kcs_; }
  double worst_time(const StageSpec& s) const {
    double worst = 0;
    for (int p = 0; p < prevs(s); ++p)
      for (int q = 0; q < nexts(s); ++q) worst = std::max(worst, t_.stage_time(xin(s, p), s.first, s.last, s.kc, xout(s, q)));
    return worst;
  }

  void col(double obj, bool integer, double ub = 1.0) { Cbc_addCol(m_, "", 0, ub, obj, integer && !relax_, 0, nullptr, nullptr); }
  void add(int c, double v) { cols_.push_back(c), coefs_.push_back(v); }
  void row(char sense, double rhs) {
    if (cols_.empty()) return;
    Cbc_addRow(m_, "", static_cast<int>(cols_.size()), cols_.data(), coefs_.data(), sense, rhs);
    cols_.clear();
    coefs_.clear();
    ++rows_;
  }
  // A stage's share of the latency that does not depend on its neighbours: its compute and, first
  // in the chain, the entry transfer.
  double own_latency(const StageSpec& s) const {
    return t_.compute(s.first, s.last, s.kc) + (s.first == 0 ? t_.entry(s.kc) : 0.0);
  }
  // The inbound side of a stage that starts after kernel 0, per predecessor group through the
  // hand-off w(first - 1, p, kc): x_in + inbound copies, or the inbound stall.
  void add_in(const StageSpec& s, double coef_per_s, bool stall) {
    for (int p = 0; p < kcs_; ++p) {
      const double x = xin(s, p);
      const double v = stall ? t_.stall(x, s.first, s.last, s.kc) : x + t_.copy_in(s.first, s.last, s.kc);
      add(w(s.first - 1, p, s.kc), v * coef_per_s);
    }
  }

  void build() {
    const bool energy = goal_ == Goal::energy, latency = goal_ == Goal::latency;
    const int nz = static_cast<int>(stages_.size());
    double& e_scale = e_scale_;
    e_scale = 0;
    for (const StageSpec& s : stages_) {
      const DeviceGroup g = t_.group(s.kc);
      const PowerStates& p = t_.power(g.kind);
      e_scale = std::max(e_scale, g.count * (std::abs(t_.exec_w(s.first, s.last, s.kc)) + p.xfer_w + p.idle_w) * p_max_);
    }
    if (!(e_scale > 0)) e_scale = 1;
    // z: the stage's busy energy that does not depend on its neighbours (kernels, host legs).
    for (const StageSpec& s : stages_) {
      const DeviceGroup g = t_.group(s.kc);
      const PowerStates& p = t_.power(g.kind);
      double e = (t_.exec_w(s.first, s.last, s.kc) - p.idle_w) * t_.compute(s.first, s.last, s.kc);
      if (s.first == 0) e += (p.xfer_w - p.idle_w) * t_.entry(s.kc);
      if (s.last == n_ - 1) e += (p.xfer_w - p.idle_w) * t_.exit(s.kc);
      col(energy ? g.count * e / e_scale : latency ? own_latency(s) / ref_ : 0.0, true);
    }
    // w: a hand-off's transfer energy on both sides.
    w0_ = nz;
    for (int b = 0; b + 1 < n_; ++b)
      for (int k = 0; k < kcs_; ++k)
        for (int k2 = 0; k2 < kcs_; ++k2) {
          const DeviceGroup g = t_.group(k), g2 = t_.group(k2);
          const PowerStates &p = t_.power(g.kind), &p2 = t_.power(g2.kind);
          const double e = g.count * (p.xfer_w - p.idle_w) * t_.transfer_out(b, k, k2) +
                           g2.count * (p2.xfer_w - p2.idle_w) * t_.transfer_in(b, k, k2);
          col(energy ? e / e_scale : latency ? t_.transfer_in(b, k, k2) / ref_ : 0.0, true);
        }
    const int col_p = w0_ + std::max(0, n_ - 1) * kcs_ * kcs_;
    col(goal_ == Goal::period ? 1.0 : 0.0, false, p_max_ / ref_);  // P / ref, at most the cap
    const int col_u = col_p + 1;
    if (energy) {
      for (const StageSpec& s : stages_) {
        const DeviceGroup g = t_.group(s.kc);
        col(g.count * t_.power(g.kind).idle_w * ref_ / e_scale, false, p_max_ / ref_);
      }
    }

    // One stage starts at kernel 0.
    for (int v = 0; v < nz; ++v)
      if (stages_[v].first == 0) add(v, 1);
    row('E', 1);
    // Flow: the stages ending at b on k are the hand-offs (b, k, *); those starting at b + 1 on k2
    // are the hand-offs (b, *, k2). Together a single chain covering every kernel in order.
    for (int b = 0; b + 1 < n_; ++b) {
      for (int k = 0; k < kcs_; ++k) {
        for (int a = 0; a <= b; ++a)
          if (const int v = z_[idx(a, b, k)]; v >= 0) add(v, 1);
        for (int k2 = 0; k2 < kcs_; ++k2) add(w(b, k, k2), -1);
        row('E', 0);
        for (int c = b + 1; c < n_; ++c)
          if (const int v = z_[idx(b + 1, c, k)]; v >= 0) add(v, 1);
        for (int k0 = 0; k0 < kcs_; ++k0) add(w(b, k0, k), -1);
        row('E', 0);
      }
    }
    // Devices per kind.
    for (int kind = 0; kind < t_.num_kinds(); ++kind) {
      for (int v = 0; v < nz; ++v)
        if (t_.group(stages_[v].kc).kind == kind) add(v, t_.group(stages_[v].kc).count);
      row('L', t_.max_count(kind));
    }
    // Period: P >= each part of a chosen stage's time, its neighbours' sides read through w
    // (exactly one hand-off on each side of a chosen stage has w = 1); M = the stage's worst
    // context lets an unchosen stage's rows go slack.
    for (int v = 0; v < nz; ++v) {
      const StageSpec& s = stages_[v];
      const double M = worst_[static_cast<std::size_t>(v)] / ref_ + 1.0;
      const double c = t_.compute(s.first, s.last, s.kc);
      // P - (the sides already added) >= constant - M (1 - z), in units of ref.
      const auto period_row = [&](double constant) {
        add(col_p, 1.0);
        add(v, -(constant / ref_ + M));
        row('G', -M);
      };
      if (!t_.overlap()) {
        // x_in + C + x_out
        if (s.first > 0) {
          for (int p = 0; p < kcs_; ++p) add(w(s.first - 1, p, s.kc), -xin(s, p) / ref_);
        }
        if (s.last < n_ - 1) {
          for (int q = 0; q < kcs_; ++q) add(w(s.last, s.kc, q), -xout(s, q) / ref_);
        }
        period_row(c + (s.first == 0 ? t_.entry(s.kc) : 0.0) + (s.last == n_ - 1 ? t_.exit(s.kc) : 0.0));
        continue;
      }
      // overlap: max(kernels, x_in + copies_in, stall(x_in), carried + x_out)
      period_row(t_.solo(s.first, s.last, s.kc));
      for (const bool stall : {false, true}) {
        if (s.first > 0) {
          add_in(s, -1.0 / ref_, stall);
          period_row(0.0);
        } else {
          const double x = t_.entry(s.kc);
          period_row(stall ? t_.stall(x, s.first, s.last, s.kc) : x + t_.copy_in(s.first, s.last, s.kc));
        }
      }
      const double carried = t_.carried(0.0, s.first, s.last, s.kc);
      if (s.last < n_ - 1) {
        for (int q = 0; q < kcs_; ++q) add(w(s.last, s.kc, q), -xout(s, q) / ref_);
        period_row(carried);
      } else {
        period_row(carried + t_.exit(s.kc));
      }
    }
    // Latency: sum of x_in + C over the stages.
    if (caps_.latency < kInf) {
      for (int v = 0; v < nz; ++v) add(v, own_latency(stages_[static_cast<std::size_t>(v)]) / caps_.latency);
      for (int b = 0; b + 1 < n_; ++b)
        for (int k = 0; k < kcs_; ++k)
          for (int k2 = 0; k2 < kcs_; ++k2) add(w(b, k, k2), t_.transfer_in(b, k, k2) / caps_.latency);
      row('L', 1 + 1e-9);
    }
    // u_z >= P - Pmax (1 - z): a chosen stage idles at p_idle for the whole period.
    if (energy) {
      for (int v = 0; v < nz; ++v) {
        add(col_u + v, 1.0);
        add(col_p, -1.0);
        add(v, -p_max_ / ref_);
        row('G', -p_max_ / ref_);
      }
    }
  }

  const CostTables& t_;
  const int n_, kcs_;
  std::vector<int> z_;  // column of (a, b, kc), -1 when the group cannot run the range
  std::vector<StageSpec> stages_;
  std::vector<double> worst_;  // per stage: its time in its slowest context (big-M and scales)
  double p_max_ = 0;  // the period's upper bound (the slowest stage, or the cap)
  double ref_ = 1;    // the time unit of the program
  double e_scale_ = 1;  // the energy unit of the program's objective
  bool relax_ = false;  // every column continuous (the LP relaxation)
  Goal goal_ = Goal::period;
  Caps caps_;
  Cbc_Model* m_ = nullptr;
  int w0_ = 0, rows_ = 0;
  std::vector<int> cols_;
  std::vector<double> coefs_;
};

MilpResult solve_once(const CostTables& t, Goal goal, const Caps& caps) { return Program(t, goal, caps).solve(); }

}  // namespace

double milp_relaxation(const CostTables& tables, Goal goal, const Caps& caps) {
  return Program(tables, goal, caps, true).relaxation();
}

Found solve_milp(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log) {
  const auto record = [&](const Pass& pass, const MilpResult& mr) {
    Found f;
    if (mr.ok) {
      f.stages = mr.stages;
      f.fig = figures(f.stages, t);
      f.ok = true;
    }
    if (log) log->add(pass, "MILP (CBC)", f, std::to_string(mr.columns) + " columns, " + std::to_string(mr.rows) + " rows");
    return f;
  };
  caps = caps_for(o, kInf);
  if (o.objective == Objective::latency) {
    const Pass quickest{.number = 9, .name = "quickest: least latency", .goal = Goal::latency, .period_cap = caps.period};
    const Found f = record(quickest, solve_once(t, Goal::latency, caps));
    if (!f.ok && caps.period < kInf)
      throw InfeasibleError("latency: no plan reaches min throughput " + std::to_string(o.min_throughput_per_s) +
                            "/s (MILP proved none)");
    return f;
  }
  if (o.objective == Objective::perf) {
    const Pass pass{.number = 1, .name = "fastest: least period", .goal = Goal::period};
    const Found fast = record(pass, solve_once(t, Goal::period, caps));
    if (!fast.ok) return fast;
    // Ties broken by energy, as the exact solver does: the least energy at that period.
    Caps at_fastest = caps;
    at_fastest.period = fast.fig.period;
    const Pass tie{.number = 2, .name = "tie-break: least energy at P*", .goal = Goal::energy, .period_cap = fast.fig.period};
    const Found e = record(tie, solve_once(t, Goal::energy, at_fastest));
    return e.ok && within(e.fig.period, fast.fig.period) ? e : fast;
  }
  if (caps_need_fastest(o)) {
    const Pass fastest{.number = 1, .name = "fastest: least period", .goal = Goal::period};
    const Found f = record(fastest, solve_once(t, Goal::period, {}));
    if (!f.ok) return f;
    caps = caps_for(o, f.fig.period);
  }
  const Pass cheapest{.number = 2, .name = "cheapest under the caps", .goal = Goal::energy, .period_cap = caps.period,
                      .latency_cap = caps.latency};
  const Found f = record(cheapest, solve_once(t, Goal::energy, caps));
  if (!f.ok && o.objective == Objective::qos)
    throw InfeasibleError("qos: no plan meets the targets (MILP proved none under period <= " +
                          std::to_string(caps.period) + " s and latency <= " + std::to_string(caps.latency) + " s)");
  return f;
}

}  // namespace dype::sched::detail
