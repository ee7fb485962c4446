#pragma once
// The exact solver's engine: a label-setting DP over (kernels done, devices used, open stage's
// group), run once per Pass (the passes themselves are in exact.cpp).
//
//   LabelDp dp(tables, {.number = 5, .name = "cheapest", .goal = Goal::energy,
//                       .dims = kMaxT | kPartial | kA});
//   const LabelDp::Final best = dp.best();      // id < 0: no plan meets the pass's caps
//   std::vector<StageSpec> stages = dp.stages(best.id);
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
//   partial = X_s + C_s of the open stage (it still grows by X_{s+1}; overlapping transfers: X_s +
//             the stage's copies, and solo = its kernels, T_s = max(solo, partial + X_{s+1})),
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
// p_idle, which SystemSpec::validate enforces). The bounds are in label_bounds.cpp.
#include <cstddef>
#include <vector>

#include "scheduler/solver/pass.h"
#include "scheduler/solver/usage.h"

namespace dype::sched::detail {

struct Label {
  // solo: what the open stage needs alone (CostTables::solo: 0 with serial transfers, its kernels
  // with overlapping ones); its final time is max(solo, partial + X_out).
  double max_t, partial, a, lat, solo;
  int parent;  // arena id of the previous stage's label; -1 for the start label
  int first, last, kc;
};

class LabelDp {
 public:
  // Pruning bounds (label_bounds.cpp), kept apart so that passes over the same tables and period
  // cap can share them: the energy bounds do not depend on the caps, the completion bounds on the
  // cap.
  struct Bounds {
    std::vector<double> w_delta, v_delta, rest_period;  // energy
    double cap = kInf;
    std::vector<double> q, r;  // completion under `cap`
  };

  LabelDp(const CostTables& t, const Pass& pass, Bounds* shared = nullptr);

  struct Final {
    int id = -1;
    double period = kInf, energy = kInf, latency = kInf;
    int devices = 0;
  };

  // Every label that reached the end within the pass's caps, with its figures.
  std::vector<Final> finals() const;
  // The best of finals() for the pass's goal (fewest devices on a tie); id < 0 when none.
  Final best() const;
  std::vector<StageSpec> stages(int id) const;
  std::size_t labels() const { return arena_.size(); }

 private:
  std::size_t state(int i, int u, int kc) const {
    return (static_cast<std::size_t>(i) * u_.size + u) * kcs_ + kc;
  }

  // label_bounds.cpp
  void rest_energy_lb();
  void completion_bounds();
  int last_range_end(int i, double cap) const;
  void transposed_transfers(int k, std::vector<double>& xo, std::vector<double>& xi) const;

  // label_dp.cpp
  bool within_caps(const Label& l) const;
  bool keep(const Label& l, int u, int i, int kc, bool opening = false) const;
  void insert_state(std::size_t s, const Label& cand);
  void run();

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

// Runs one pass and records it in `log` (when given): the best plan with its figures.
Found run_pass(const CostTables& t, const Pass& pass, PassLog* log, LabelDp::Bounds* shared = nullptr);

}  // namespace dype::sched::detail
