#pragma once
// What one solver pass is asked (Pass, written with designated initialisers so its settings read
// by name) and what it returns (Found); PassLog records the passes that ran for Plan::passes.
//
//   const Pass cheapest{.number = 5, .name = "cheapest under the caps", .goal = Goal::energy,
//                       .dims = kMaxT | kPartial | kA, .period_cap = caps.period};
//   const Found f = run_pass(tables, cheapest, &log);  // label_dp.h
#include <string>
#include <vector>

#include "scheduler/plan.h"
#include "scheduler/solver/figures.h"

namespace dype::sched::detail {

// The label dimensions a pass compares for dominance (see label_dp.h): closed stages' max time,
// the open stage's time, the additive energy term, the latency so far.
enum Dim : unsigned { kMaxT = 1, kPartial = 2, kA = 4, kLat = 8 };
// What a pass minimises first (ties: energy, or period for Goal::energy).
enum class Goal { period, energy, latency };

struct Pass {
  int number = 0;          // as numbered in exact.cpp's comments; recorded in Plan::passes
  const char* name = "";   // what the pass is for, e.g. "fastest: min period"
  Goal goal = Goal::period;
  unsigned dims = kMaxT | kPartial;
  double period_cap = kInf;  // hard constraints
  double latency_cap = kInf;
  double energy_ub = kInf;   // a known plan's energy: labels that cannot beat it are pruned
  int max_group = 1 << 30;   // largest device count per stage considered (a restricted pre-pass)
};

struct Found {
  std::vector<StageSpec> stages;
  Figures fig;
  bool ok = false;
};

// The passes one solve ran, in order.
class PassLog {
 public:
  void add(const Pass& pass, const char* method, const Found& found, const std::string& work) {
    passes_.push_back({.number = pass.number,
                       .name = pass.name,
                       .method = method,
                       .found = found.ok,
                       .period_s = found.ok ? found.fig.period : kInf,
                       .energy_j = found.ok ? found.fig.energy : kInf,
                       .work = work});
  }
  std::vector<SolverPass> take() { return std::move(passes_); }

  // "1 label", "812 labels".
  static std::string count(std::size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  }

 private:
  std::vector<SolverPass> passes_;
};

}  // namespace dype::sched::detail
