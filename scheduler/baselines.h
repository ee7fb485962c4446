#pragma once
// The paper's comparison points (Section VI), as named plans priced by the same cost model:
//   gpu-only, fpga-only, cpu-only  best plan on one kind (exact solver restricted to that kind)
//   theoretical-additive           homogeneous systems side by side: throughputs add, energy per
//                                  inference = total power / total throughput (the
//                                  throughput-weighted mean energy efficiency); no stages
//   static                         fixed op -> kind mapping (SystemSpec::op_kind), stages = runs
//                                  of consecutive kernels on one kind, fixed counts
//                                  (SystemSpec::static_counts, else the kind's devices split evenly)
//   fleetrec                       fixed kind per kernel (op_kind), grouping and counts optimised
#include <string>
#include <vector>

#include "scheduler/solver.h"

namespace dype::sched {

// Names accepted by baseline(): "gpu-only", "fpga-only", "cpu-only", "theoretical-additive",
// "static", "fleetrec", and "<kind>-only" for any kind of the system.
std::vector<std::string> baseline_names(const SystemSpec& system);

// The paper's theoretical-additive from the homogeneous systems' figures (Section VI): throughputs
// summed, energy efficiencies (inferences per joule) averaged over the systems.
struct TheoreticalAdditive {
  double throughput_per_s = 0.0;
  double efficiency_sum = 0.0;
  int systems = 0;
  void add(double throughput, double energy_j) {
    throughput_per_s += throughput;
    efficiency_sum += 1.0 / energy_j;
    ++systems;
  }
  double energy_j() const { return systems / efficiency_sum; }  // per inference
};

// Throws InfeasibleError when the baseline cannot be formed on this system (e.g. no GPU).
Plan baseline(const std::string& name, const SystemSpec& system, const CostModel& model,
              const Workload& workload, const ObjectiveSpec& objective = {});

}  // namespace dype::sched
