#include "runtime/handoff_route.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace dype::rt {

std::string_view to_string(Route r) {
  return r == Route::direct ? "direct" : "host relay";
}

namespace {

bool known(std::span<const RouteEnd> ends) {
  return std::all_of(ends.begin(), ends.end(), [](const RouteEnd& e) { return e.topo >= 0; });
}

double rows_bytes(RowRange r, double row_bytes) {
  return static_cast<double>(std::max<std::int64_t>(0, r.count())) * row_bytes;
}

// `tensors` legs of bytes / tensors each.
double per_tensor(double one_leg_s, int tensors) {
  return std::max(1, tensors) * one_leg_s;
}

RouteCost host_relay_cost(const hw::Topology& topo, std::span<const RouteEnd> src, std::span<const RouteEnd> dst,
                          double row_bytes, int tensors, CopyHolds engines) {
  std::map<int, double> busy;
  RouteCost c;
  double up = 0.0, down = 0.0;
  const int nt = std::max(1, tensors);
  for (const RouteEnd& s : src) {
    if (s.rows.count() <= 0) continue;
    const auto bytes = static_cast<std::size_t>(rows_bytes(s.rows, row_bytes) / nt);
    const double t = per_tensor(topo.estimate_to_host(std::span<const int>(&s.topo, 1), bytes).time_s, nt);
    busy[s.topo] += t;
    up = std::max(up, t);
  }
  for (const RouteEnd& d : dst) {
    if (d.rows.count() <= 0) continue;
    const auto bytes = static_cast<std::size_t>(rows_bytes(d.rows, row_bytes) / nt);
    const double t = per_tensor(topo.estimate_host_to(std::span<const int>(&d.topo, 1), bytes).time_s, nt);
    busy[d.topo] += t;
    down = std::max(down, t);
  }
  c.span_s = up + down;
  c.outbound_s = up;
  c.inbound_s = down;
  if (engines == CopyHolds::direction_engines) {
    c.senders_s = up;
    c.receivers_s = down;
    return c;
  }
  for (const RouteEnd& s : src) c.senders_s = std::max(c.senders_s, busy[s.topo]);
  for (const RouteEnd& d : dst) c.receivers_s = std::max(c.receivers_s, busy[d.topo]);
  return c;
}

RouteCost direct_cost(const hw::Topology& topo, std::span<const RouteEnd> src, std::span<const RouteEnd> dst,
                      double row_bytes, int tensors, CopyHolds engines, std::vector<PeerCopy>& copies) {
  // What a copy holds: the two devices, or the sender's outbound engine (key 2d + 1) and the
  // receiver's inbound one (2d).
  const bool split = engines == CopyHolds::direction_engines;
  auto out_key = [&](int d) { return split ? 2 * d + 1 : d; };
  auto in_key = [&](int d) { return split ? 2 * d : d; };
  const int nt = std::max(1, tensors);
  std::vector<PeerCopy> todo;
  for (std::size_t i = 0; i < dst.size(); ++i) {
    for (std::size_t j = 0; j < src.size(); ++j) {
      const RowRange r{std::max(src[j].rows.lo, dst[i].rows.lo), std::min(src[j].rows.hi, dst[i].rows.hi)};
      if (r.count() <= 0) continue;
      PeerCopy c;
      c.src = j;
      c.dst = i;
      c.rows = r;
      if (src[j].topo != dst[i].topo) {
        const auto bytes = static_cast<std::size_t>(rows_bytes(r, row_bytes) / nt);
        c.end_s = per_tensor(topo.estimate(std::span<const int>(&src[j].topo, 1),
                                           std::span<const int>(&dst[i].topo, 1), bytes).time_s, nt);
      }
      todo.push_back(c);  // end_s holds the duration until placed
    }
  }
  // List scheduling: the copy that can start first (both ends free) goes next; among those the
  // longest, then the first listed. Times within 2% of the mean copy count as equal, so shards
  // that differ by a few rows (a split by nnz) get the order equal ones get: with three devices
  // swapping thirds that is the two-round cycle, where exact comparisons could pick a three-round
  // order.
  double mean = 0.0;
  for (const PeerCopy& c : todo) mean += c.end_s;
  const double tol = todo.empty() ? 0.0 : 0.02 * mean / static_cast<double>(todo.size());
  std::map<int, double> free, busy, sent, received;
  copies.clear();
  RouteCost cost;
  while (!todo.empty()) {
    std::size_t best = 0;
    double best_start = 0.0;
    for (std::size_t n = 0; n < todo.size(); ++n) {
      const PeerCopy& c = todo[n];
      const double start = std::max(free[out_key(src[c.src].topo)], free[in_key(dst[c.dst].topo)]);
      const bool earlier = start < best_start - tol;
      const bool same_start = std::abs(start - best_start) <= tol;
      if (n == 0 || earlier || (same_start && c.end_s > todo[best].end_s + tol)) {
        best = n;
        best_start = start;
      }
    }
    PeerCopy c = todo[best];
    todo.erase(todo.begin() + static_cast<std::ptrdiff_t>(best));
    const double dur = c.end_s;
    c.start_s = best_start;
    c.end_s = best_start + dur;
    const int a = src[c.src].topo, b = dst[c.dst].topo;
    if (a != b) free[out_key(a)] = free[in_key(b)] = c.end_s;  // a local copy holds no link
    busy[a] += dur;
    if (b != a) busy[b] += dur;
    sent[a] += dur;
    received[b] += dur;
    cost.span_s = std::max(cost.span_s, c.end_s);
    copies.push_back(c);
  }
  for (const auto& [d, t] : sent) cost.outbound_s = std::max(cost.outbound_s, t);
  for (const auto& [d, t] : received) cost.inbound_s = std::max(cost.inbound_s, t);
  if (split) {
    cost.senders_s = cost.outbound_s;
    cost.receivers_s = cost.inbound_s;
    return cost;
  }
  for (const RouteEnd& s : src) cost.senders_s = std::max(cost.senders_s, busy[s.topo]);
  for (const RouteEnd& d : dst) cost.receivers_s = std::max(cost.receivers_s, busy[d.topo]);
  return cost;
}

bool share_a_device(std::span<const RouteEnd> a, std::span<const RouteEnd> b) {
  for (const RouteEnd& x : a)
    for (const RouteEnd& y : b)
      if (x.topo == y.topo) return true;
  return false;
}

}  // namespace

RoutePlan plan_route(const hw::Topology& topology, std::span<const RouteEnd> sources,
                     std::span<const RouteEnd> destinations, double row_bytes, int tensors, CopyHolds engines) {
  RoutePlan p;
  if (sources.empty() || destinations.empty() || !known(sources) || !known(destinations)) return p;
  p.same_devices = share_a_device(sources, destinations);
  p.host_relay = host_relay_cost(topology, sources, destinations, row_bytes, tensors, engines);
  p.direct = direct_cost(topology, sources, destinations, row_bytes, tensors, engines, p.copies);
  auto measure = [&](const RouteCost& c) {
    return p.same_devices ? c.span_s : std::max(c.senders_s, c.receivers_s);
  };
  const double h = measure(p.host_relay), d = measure(p.direct);
  p.route = d < h * (1.0 - 1e-9) ? Route::direct : Route::host_relay;
  return p;
}

}  // namespace dype::rt
