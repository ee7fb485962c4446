#pragma once
// Usage encoding: the devices a partial plan uses, per kind, as one mixed-radix index
// u = sum_t used_t * stride_t, so DP tables are flat arrays indexed [kernel][u][group].
//
//   const Usage us(tables);
//   const int u2 = us.next[u * tables.num_kc() + kc];  // u plus group kc; -1 when it does not fit
//   us.digits[u2][kind];                               // devices of `kind` in use at u2
#include <vector>

#include "scheduler/cost_tables.h"

namespace dype::sched::detail {

struct Usage {
  std::vector<int> stride;               // [t]
  std::vector<std::vector<int>> digits;  // [u][t] devices of kind t in use
  std::vector<double> idle_w;            // [u] = sum_t used_t * p_idle(t)
  std::vector<int> devices;              // [u] = sum_t used_t
  std::vector<int> next;                 // [u * kcs + kc] = u plus group kc, -1 when it does not fit
  int size = 1;

  explicit Usage(const CostTables& t);
};

}  // namespace dype::sched::detail
