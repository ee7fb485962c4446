#pragma once
// The exact solver (solver "exact", the default): numbered passes of the period search and the
// label DP, whose order and purpose are listed at the top of exact.cpp.
//
//   Caps caps;
//   PassLog log;
//   const Found f = solve_exact(tables, objective, caps, &log);  // caps: what the plan had to meet
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

// The optimum of the cost model for the objective (not ok when no pipeline can be formed);
// InfeasibleError, saying which target and by how much, when a qos target cannot be met.
// `caps` receives the caps the plan was held to (for explain), `log` the passes that ran.
Found solve_exact(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
