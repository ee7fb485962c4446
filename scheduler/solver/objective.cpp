#include "scheduler/solver/objective.h"

#include <string>

#include "common/error.h"
#include "scheduler/solver.h"
#include "scheduler/solver/format.h"

namespace dype::sched::detail {

Caps caps_for(const ObjectiveSpec& o, double fastest_period_s) {
  Caps caps;
  switch (o.objective) {
    case Objective::perf:
    case Objective::energy: break;
    case Objective::balanced: caps.period = fastest_period_s / o.balance_ratio; break;
    case Objective::qos:
      caps.period = o.min_throughput_per_s > 0 ? 1.0 / o.min_throughput_per_s : kInf;
      caps.latency = o.max_latency_s;
      break;
    case Objective::latency:
      caps.period = o.min_throughput_per_s > 0 ? 1.0 / o.min_throughput_per_s : kInf;
      break;
  }
  return caps;
}

void check_objective(const ObjectiveSpec& o) {
  if (!(o.balance_ratio > 0 && o.balance_ratio <= 1)) {
    throw InputError("objective.balance_ratio", "must be in (0, 1], got " + std::to_string(o.balance_ratio));
  }
  if (!(o.min_throughput_per_s >= 0)) throw InputError("objective.min_throughput_per_s", "must be >= 0");
  if (!(o.max_latency_s > 0)) throw InputError("objective.max_latency_s", "must be > 0");
}

void require_schedulable(const CostTables& t) {
  for (int k = 0; k < t.num_kernels(); ++k) {
    bool any = false;
    for (int kc = 0; kc < t.num_kc() && !any; ++kc) any = t.compute(k, k, kc) < kInf;
    if (any) continue;
    // Say so when memory is what rules it out: the group that comes closest, and by how much.
    double least = kInf;
    int at = -1;
    for (int kc = 0; kc < t.num_kc(); ++kc) {
      const double s = t.memory_shortfall(k, k, kc);
      if (s > 0 && s < least) least = s, at = kc;
    }
    if (at >= 0) {
      const DeviceGroup g = t.group(at);
      throw InfeasibleError("kernel " + std::to_string(k) + " fits no device's memory: the closest, " +
                            std::to_string(g.count) + " x " + t.kind_name(g.kind) + ", is short by " +
                            fmt(least / 1e9, "GB") + " a device");
    }
    throw InfeasibleError("no device kind available to the scheduler can run kernel " + std::to_string(k));
  }
}

}  // namespace dype::sched::detail
