#include "scheduler/solver/figures.h"

#include <algorithm>

namespace dype::sched {

Figures figures(const std::vector<StageSpec>& st, const CostTables& t, bool closed) {
  Figures f;
  const std::size_t n = st.size();
  std::vector<double> time(n), xin(n), xout(n), comp(n);
  for (std::size_t s = 0; s < n; ++s) {
    xin[s] = s == 0 ? t.entry(st[0].kc) : t.transfer_in(st[s].first - 1, st[s - 1].kc, st[s].kc);
    xout[s] = s + 1 < n ? t.transfer_out(st[s].last, st[s].kc, st[s + 1].kc) : closed ? t.exit(st[s].kc) : 0.0;
    comp[s] = t.compute(st[s].first, st[s].last, st[s].kc);
    f.devices += t.group(st[s].kc).count;
  }
  for (std::size_t s = 0; s < n; ++s) {
    time[s] = comp[s] < kInf ? t.stage_time(xin[s], st[s].first, st[s].last, st[s].kc, xout[s]) : kInf;
    f.period = std::max(f.period, time[s]);
    f.latency += xin[s] + comp[s];
  }
  // Power above idle for each busy second, idle power for the whole period: with serial transfers
  // this is p_exec C + p_xfer X + p_idle (P - T); with overlapping ones a device computing and
  // copying at once draws both increments.
  for (std::size_t s = 0; s < n; ++s) {
    const DeviceGroup g = t.group(st[s].kc);
    const PowerStates& p = t.power(g.kind);
    const double exec_w = t.exec_w(st[s].first, st[s].last, st[s].kc);
    f.energy += g.count * ((exec_w - p.idle_w) * comp[s] + (p.xfer_w - p.idle_w) * (xin[s] + xout[s]) + p.idle_w * f.period);
  }
  return f;
}

}  // namespace dype::sched
