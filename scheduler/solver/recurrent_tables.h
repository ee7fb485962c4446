#pragma once
// The folded tables of a layer-recurrent shape (recurrent.h), shared by its search
// (shape_search.cpp) and the rest of recurrent.cpp.
#include "scheduler/cost_tables.h"
#include "scheduler/recurrent.h"

namespace dype::sched::detail {

// The round's allowed kinds: kernel k of the round may run on a kind when every round's allows it.
SpaceLimits fold_limits(const SpaceLimits& limits, Shape shape);

// Pins the ends of `t` to the pair (kf first, kl last) with the hand-off H(kl -> kf): its
// receiving side on the first stage, its sending side on the last.
void pin_ends(CostTables& t, const FoldedCostModel& folded, int kf, int kl);

}  // namespace dype::sched::detail
