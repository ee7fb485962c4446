#pragma once
// MILP-SPLIT (solver "milp-split"), DiviML's modularity heuristic (seed 000, Section IV-B1) on a
// chain: cut the kernels into modules (split_modules(), lower_bound.h), solve each module's MILP
// (milp.h) alone for every way it can be entered and left, and combine the pieces by a DP over the
// modules. DiviML's DP keys a module by the devices its channel's ends run on; in a pipeline every
// stage also holds its devices for good, so the modules share one pool and the DP's states at a cut
// are partial plans (devices used per kind, the group the last stage runs on, latency so far),
// kept where no other with the same last group uses no more devices at no more latency. Module j
// extends a state with each of its undominated solutions (least latency under the devices left;
// then, for each kind it used, the same with fewer of that kind, and so on), entered
//   - after a stage on group p: every first stage pays the cut's hand-off from p (in-side);
//   - continuing a stage on group q over the cut: the first stage is on q's devices (counted once,
//     in the module that opened it), no hand-off; only where q's compute is additive across the
//     cut (C(a, b) = C(a, m) + C(m + 1, b), additive_across()), so the two pieces cost the stage;
// and left with its last stage on a given group (the last module: the best solution only). Any
// plan's piece in a module is beaten or matched by one of those solutions under the devices the
// earlier pieces left, so the DP loses nothing. The MILP solves are memoised per (module, entry,
// exit): one under budget B using u answers every budget between u and B.
// Exact for the latency objective over every plan whose stages each either end at the cuts or span
// them on a group additive across them (for additive cost models: every plan); a stage spanning a
// cut on a non-additive group is outside its space, so it can miss the optimum there (measured in
// tests/unit/test_sched_split.cpp and dype-eval).
// Other objectives and a throughput floor are refused (InputError): a stage's period includes its
// hand-out into the next module and a spanning stage's whole range, which no module sees alone,
// and the period (a max over modules) and the idle energy (every device idles for the global
// period) do not add up over modules, so the module optima do not combine into an optimum.
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

// Whether group kc's compute is additive across the cut after kernel m: the pieces of every range
// spanning it cost the range (relative 1e-9).
bool additive_across(const CostTables& tables, int m, int kc);

Found solve_milp_split(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log,
                       int max_module_kernels = 3);

}  // namespace dype::sched::detail
