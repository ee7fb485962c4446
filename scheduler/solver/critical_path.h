#pragma once
// Critical-path partitioning (solver "critical-path"; Mayer et al., "The TensorFlow Partitioning
// and Scheduling Problem: It's the Critical Path!", seed 002, section 3.2.2, with its PCT local
// scheduling of section 4.1): the whole critical path on the fastest device that can hold it, or
// divided among the fastest devices when none can. Minimises one request's makespan.
//
//   Caps caps;
//   PassLog log;
//   const Found f = solve_critical_path(tables, objective, caps, &log);
//
// On a chain the critical path is every kernel; how devices, speeds and the division are read
// for our pipelines is in critical_path.cpp. It ignores energy and the period.
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found solve_critical_path(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
