#pragma once
// Why each stage got its kind and count: every other (kind, count) that fits beside the other
// stages is scored under the objective and its caps; the best one is the stage's runner-up.
//
//   explain_with(plan, tables, Objective::balanced, caps);  // fills Stage::why / runner_up
// (The public entry, explain() in solver.h, works out the caps itself.)
#include "scheduler/solver/objective.h"

namespace dype::sched::detail {

void explain_with(Plan& plan, const CostTables& tables, Objective objective, const Caps& caps);

}  // namespace dype::sched::detail
