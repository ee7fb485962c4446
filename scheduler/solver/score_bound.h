#pragma once
// What lets solve_shapes() (and image choice through it) skip a solve that cannot beat a plan it
// already has: a lower bound on the score of every plan over a set of cost tables, their ends
// (CostTables::entry/exit, pinned by a recurrent solve) included, and for the period an exact
// feasibility check. Both are sound, so a skipped solve never held a plan that could have won,
// and both cost far less than a solve (the bound reads the first and last stages' ranges only).
//
//   if (score_lower_bound(t, Objective::perf) > limit || !period_within(t, limit)) skip;
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"

namespace dype::sched::detail {

// At most the score (detail::score: period for perf, latency for latency, energy otherwise) of
// every complete plan over `t` that the solvers could return, whatever its caps; kInf when there
// is none. A plan's first stage opens with entry(kc) and its last closes with exit(kc); every
// stage time grows with its hand-offs (CostTables::stage_time), so the first and last stages'
// ranges bound the period from below, and with the energy's terms all >= 0 (p_exec, p_xfer >=
// p_idle) their own terms bound the energy; when stages only grow (ranges_grow) every kernel's
// fastest time alone bounds the period too (as LabelDp's rest_period).
double score_lower_bound(const CostTables& t, Objective objective);
// The same for `t` with its ends pinned to one pair (CostTables::set_ends with entry only for
// group `first` and exit only for `last`), without pinning them.
double score_lower_bound(const CostTables& t, Objective objective, int first, double entry, int last, double exit);

// Whether some plan over `t` has period <= p (one exact PeriodSearch check).
bool period_within(const CostTables& t, double p);

}  // namespace dype::sched::detail
