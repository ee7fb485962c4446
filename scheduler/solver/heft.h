#pragma once
// HEFT, Heterogeneous Earliest Finish Time (solver "heft"; Topcuoglu et al. 2002, with the
// feasibility restriction Mayer et al. add in "The TensorFlow Partitioning and Scheduling Problem:
// It's the Critical Path!", seed 002): a list scheduler minimising one request's makespan.
//
//   Caps caps;
//   PassLog log;
//   const Found f = solve_heft(tables, objective, caps, &log);
//
// How it is adapted to our pipelines (heft.cpp says it in full): a processor is a device group
// (kind, count) drawn from the devices left, a stage is a maximal run of kernels on one processor,
// the count is whichever group finishes the kernel first. It ignores energy and the period.
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found solve_heft(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
