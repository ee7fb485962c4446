#pragma once
// Block partitioning with Kernighan-Lin refinement (solver "kl"; Tavarageri, Sridharan and Kaul,
// "Automatic Model Parallelism for Deep Neural Networks with Compiler and Hardware Support",
// seed 001, section 2): the chain cut into blocks of equal cost, one per device, then kernels
// moved between devices to cut communication and even out the devices' loads.
//
//   Caps caps;
//   PassLog log;
//   const Found f = solve_kl(tables, objective, caps, &log);
//
// Each device's block is one stage on that single device (count 1); how blocks are mapped and
// which moves keep stages contiguous is in kl_partition.cpp. It ignores energy.
#include "scheduler/solver/objective.h"
#include "scheduler/solver/pass.h"

namespace dype::sched::detail {

Found solve_kl(const CostTables& tables, const ObjectiveSpec& objective, Caps& caps, PassLog* log);

}  // namespace dype::sched::detail
