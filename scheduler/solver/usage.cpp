#include "scheduler/solver/usage.h"

namespace dype::sched::detail {

Usage::Usage(const CostTables& t) {
  for (int k = 0; k < t.num_kinds(); ++k) {
    stride.push_back(size);
    size *= t.max_count(k) + 1;
  }
  digits.assign(size, std::vector<int>(t.num_kinds(), 0));
  idle_w.assign(size, 0.0);
  devices.assign(size, 0);
  for (int u = 0; u < size; ++u) {
    int rest = u;
    for (int k = t.num_kinds() - 1; k >= 0; --k) {
      digits[u][k] = rest / stride[k];
      rest %= stride[k];
      idle_w[u] += digits[u][k] * t.power(k).idle_w;
      devices[u] += digits[u][k];
    }
  }
  const int kcs = t.num_kc();
  next.assign(static_cast<std::size_t>(size) * kcs, -1);
  for (int u = 0; u < size; ++u) {
    for (int kc = 0; kc < kcs; ++kc) {
      const DeviceGroup g = t.group(kc);
      if (digits[u][g.kind] + g.count <= t.max_count(g.kind)) {
        next[static_cast<std::size_t>(u) * kcs + kc] = u + g.count * stride[g.kind];
      }
    }
  }
}

}  // namespace dype::sched::detail
