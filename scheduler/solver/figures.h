#pragma once
// The cost formula of plan.h, written once: a complete pipeline's period, latency, energy per
// inference and devices, from the cost tables. evaluate() (plan.cpp) fills a Plan's figures with
// it; the solvers, explain and the brute-force enumerator score candidate stage lists with it.
//
//   const Figures f = figures({{0, 1, kc_fpga3}, {2, 3, kc_gpu2}}, tables);
//   f.period;  // max_s T_s, kInf when a stage's group cannot run its kernels
#include <vector>

#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"

namespace dype::sched {

struct Figures {
  double period = 0, latency = 0, energy = 0;
  int devices = 0;
};

// Stages [0, size) as a complete pipeline (the first receives tables.entry() of its group, the
// last sends tables.exit(): both 0 unless a recurrent solve set them):
//   X_s = transfer into stage s, T_s = X_s + C_s + X_{s+1} (serial; overlap: CostTables::stage_time),
//   P = max_s T_s, latency = sum_s (X_s + C_s),
//   E = sum_s c_s ((p_exec - p_idle) C_s + (p_xfer - p_idle) (X_s + X_{s+1}) + p_idle P).
// When a stage cannot run its kernels the period is kInf and the energy meaningless (NaN): test
// the period first. Device limits are not checked here (evaluate() does).
// closed = false: a partial pipeline (Algorithm 1's dp entries), whose last stage does not send
// its exit transfer yet.
Figures figures(const std::vector<StageSpec>& stages, const CostTables& tables, bool closed = true);

}  // namespace dype::sched
