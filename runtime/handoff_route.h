#pragma once
// How a stage's input reaches devices that each need more rows than they own (every row before an
// SpMM, a halo before a window attention): the one rule the transfer engine executes
// (transfer.cpp) and RuntimeCostModel costs (planner.cpp), between stages and inside a stage.
// Two routes, each costed from the topology:
//  - host relay: every source writes the rows it owns to host memory once (all sources at once,
//    each on its own link), then every destination reads the rows it needs (all at once);
//  - direct: every source sends each destination, peer to peer, the rows of its need that it owns
//    (P2P where the topology allows, else that copy is host-staged); a copy occupies both ends, a
//    device's own rows into its own wider buffer are a local copy. The copies are issued in the
//    order list scheduling gives (the copy that can start first goes first), so disjoint pairs
//    run side by side.
// The cheaper route is taken. Inside a stage (the same devices on both sides) cheaper means the
// earlier moment every destination holds its rows, as the next kernel waits for it. Between
// stages each stage is charged its own side (the senders their sends, the receivers their
// receives), so cheaper means the smaller of the two sides' busiest device. Ties go to the host
// relay. Example, PCIe 4.0 with P2P, one GPU handing X (t seconds over one link) to two GPUs for
// an SpMM: direct sends two copies from one link (senders 2t, receivers t), the host relay writes
// once and both read at once (t and t): host relay. Inside a 2-GPU SpMM stage: direct swaps the
// halves (t/2 each way, t in all), the host relay writes halves and reads wholes (1.5t): direct.
//
//   rt::RouteEnd src[] = {{g0, {0, 1000}}};
//   rt::RouteEnd dst[] = {{g1, {0, 1000}}, {g2, {0, 1000}}};
//   rt::RoutePlan p = rt::plan_route(topology, src, dst, 4.0 * 256, 1);
//   if (p.route == rt::Route::direct) for (const rt::PeerCopy& c : p.copies) ...
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "hw/topology.h"
#include "runtime/rows_needed.h"

namespace dype::rt {

// One end of a redistribution: a device (topology index) and its rows (a source: the rows it
// owns; a destination: the rows it needs).
struct RouteEnd {
  int topo = -1;
  RowRange rows;
};

enum class Route { host_relay, direct };
std::string_view to_string(Route r);

struct RouteCost {
  double senders_s = 0.0;    // the busiest source device's own copy time (its outbound engine's)
  double receivers_s = 0.0;  // the busiest destination device's own copy time (its inbound engine's)
  double span_s = 0.0;       // until every destination holds its rows (all devices free at 0)
  // Per copy direction (a device's outbound engine: up legs, copies sent; inbound: down legs,
  // copies received), the busiest device's.
  double outbound_s = 0.0;
  double inbound_s = 0.0;
};

// One copy of the direct route: rows [rows.lo, rows.hi) from source `src` to destination `dst`
// (indices into the two lists), at the times list scheduling placed it.
struct PeerCopy {
  std::size_t src = 0, dst = 0;
  RowRange rows;
  double start_s = 0.0, end_s = 0.0;
};

struct RoutePlan {
  Route route = Route::host_relay;
  RouteCost host_relay, direct;
  std::vector<PeerCopy> copies;  // the direct route's copies in issue order
  bool same_devices = false;     // an exchange inside a stage
  const RouteCost& chosen() const { return route == Route::direct ? direct : host_relay; }
};

// `row_bytes`: bytes of one row over all tensors; `tensors`: how many tensors move (each copy and
// leg is made once per tensor, paying the link latency each time). Sources' rows are disjoint.
// `engines`: whether a copy holds whole devices (serial transfers) or the sender's outbound and
// the receiver's inbound copy engine (overlapping transfers: two devices swap rows at once).
enum class CopyHolds { devices, direction_engines };
RoutePlan plan_route(const hw::Topology& topology, std::span<const RouteEnd> sources,
                     std::span<const RouteEnd> destinations, double row_bytes, int tensors,
                     CopyHolds engines = CopyHolds::devices);

}  // namespace dype::rt
