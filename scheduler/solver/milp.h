#pragma once
// The mapping as a mixed-integer program (solver "milp"), solved by COIN-OR CBC: an exact solver
// built independently of the DP, after DiviML (seed 000), which formulates model-parallel mapping
// as a MILP. Used to check the exact DP on small instances and in dype-eval's solver comparison.
//
// Formulation (over the same CostTables and cost formula, figures.h): binaries z(a, b, k) choose
// stage [a, b] on group k, binaries w(b, k, k') the hand-off after kernel b from group k to k'.
//   exactly one stage starts at kernel 0;
//   flow at each boundary b: stages ending at b on k = sum_k' w(b, k, k'), stages starting at
//     b + 1 on k' = sum_k w(b, k, k')  (a single chain of stages covering the kernels in order);
//   devices: sum of z x count over each kind <= the kind's devices;
//   period:  P >= each part of a chosen stage's time (serial: x_in + C + x_out; overlap: kernels,
//     x_in + inbound copies, the inbound stall, outbound + x_out), the sides read through the w of
//     its boundaries (one of them is 1 when the stage is chosen), relaxed by big-M when it is not;
//   latency = sum of C z + x_in w;  caps as the objective (objective.h) sets them;
//   energy:  E = sum of busy energy over z and w + sum idle_z u_z, u_z = P z linearised
//     (u_z >= P - Pmax (1 - z)).
// latency minimises sum of C z + x_in w (under P <= the floor's period); perf minimises P (then E at that P, as the exact solver breaks ties), energy/balanced/qos minimise
// E (balanced first solves perf for its cap).
// The chosen stages are then priced by figures() like every other solver's. Times are scaled to
// O(1) for the LP; CBC's tolerances (1e-7 of the scale) bound how far a near-tie may go either way.
// The variable count grows as n^2 x groups^3: meant for instances of a few kernels (a GNN), not for
// the 160-kernel transformer.
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found solve_milp(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

// The same program's LP relaxation (every binary in [0, 1]) for one goal under `caps`, solved by
// CBC's LP solver (CLP) and unscaled: seconds for Goal::period and Goal::latency, joules for
// Goal::energy. A lower bound on that goal's optimum under the caps (lower_bound.h); kInf when
// even the relaxation is infeasible, NaN when CLP did not prove its optimum.
double milp_relaxation(const CostTables& tables, Goal goal, const Caps& caps);

}  // namespace dype::sched::detail
