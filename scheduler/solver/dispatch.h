#pragma once
// The solver a SolverKind names, over one set of cost tables: used by solve() (flat plans) and by
// solve_shapes() for every layer-recurrent shape, so each shape runs the solver that was asked for.
#include "scheduler/solver.h"
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found run_solver(const CostTables& tables, const ObjectiveSpec& objective, SolverKind solver, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
