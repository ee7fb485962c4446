#pragma once
// OverSeer's NeuroPartitioner (solver "overseer"; Mukherjee et al., "OverSeer: Efficient DNN
// Execution on Heterogeneous Devices", seed 004, section 2): a dynamic program over the canonical
// tree of the model that picks each operation's device for the least sequential runtime, compute
// plus communication (its Eq. 1 and 2).
//
//   Caps caps;
//   PassLog log;
//   const Found f = solve_overseer(tables, objective, caps, &log);
//
// On our chain the tree is the chain and the DP is exact for what it minimises: the plan's latency
// (figures.h) over every pipeline the devices allow. How devices and counts enter the DP is in
// overseer.cpp. It ignores the period and energy.
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found solve_overseer(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
