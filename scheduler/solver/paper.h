#pragma once
// The paper's DP (solver "paper"): Algorithm 1 of the DyPe paper as published, generalised from
// (FPGAs, GPUs) to a usage vector over any number of kinds. Kept to measure the exact solver
// against; it can miss the optimum (see paper.cpp).
//
//   Caps caps;
//   const Found f = solve_paper(tables, objective, caps, &log);
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found solve_paper(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
