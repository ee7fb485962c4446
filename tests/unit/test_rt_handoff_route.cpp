// Stage-input distribution: the host relay against direct peer copies, costed from the topology
// (link bandwidths of the PCIe 4.0 spec: 31.5 GB/s per direction on x16), and the transfer engine
// moving the data by the route chosen, with the right rows arriving.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "hw/topology.h"
#include "runtime/handoff_route.h"
#include "runtime/transfer.h"
#include "test_rt_common.h"

namespace dype::rt {
namespace {

constexpr double kX16 = 16 * 16e9 * 128 / 130 / 8;  // PCIe 4.0 x16 (16 GT/s, 128b/130b), bytes/s per direction
constexpr double kLatency = 2e-6;   // per leg (hw::Link default)
constexpr std::int64_t kRows = 100000;
constexpr double kRowBytes = 4.0 * 256;

hw::Topology gpus(int n, bool p2p) {
  hw::Topology t(1, 128e9);
  for (int i = 0; i < n; ++i) t.add_device({"gpu" + std::to_string(i), 0, {hw::LinkType::pcie, 4, 16}, p2p});
  return t;
}

// One leg of `rows` rows over one x16 link.
double leg(std::int64_t rows) {
  return kLatency + static_cast<double>(rows) * kRowBytes / kX16;
}

std::vector<RouteEnd> halves(int n) {
  std::vector<RouteEnd> v;
  for (int j = 0; j < n; ++j) v.push_back({j, {kRows * j / n, kRows * (j + 1) / n}});
  return v;
}

std::vector<RouteEnd> every_row(int first, int n) {
  std::vector<RouteEnd> v;
  for (int j = 0; j < n; ++j) v.push_back({first + j, {0, kRows}});
  return v;
}

TEST(HandoffRoute, OneSenderToTwoReadersRelaysThroughHostMemory) {
  const hw::Topology t = gpus(3, true);
  const std::vector<RouteEnd> src{{0, {0, kRows}}};
  const RoutePlan p = plan_route(t, src, every_row(1, 2), kRowBytes, 1);
  EXPECT_FALSE(p.same_devices);
  // Direct: the sender's link carries both copies; each reader its own.
  EXPECT_NEAR(p.direct.senders_s, 2 * leg(kRows), 1e-9);
  EXPECT_NEAR(p.direct.receivers_s, leg(kRows), 1e-9);
  // Relay: written once, read by both at once.
  EXPECT_NEAR(p.host_relay.senders_s, leg(kRows), 1e-9);
  EXPECT_NEAR(p.host_relay.receivers_s, leg(kRows), 1e-9);
  EXPECT_EQ(p.route, Route::host_relay);
}

TEST(HandoffRoute, TwoDevicesSwapHalvesDirectly) {
  const hw::Topology t = gpus(2, true);
  const RoutePlan p = plan_route(t, halves(2), every_row(0, 2), kRowBytes, 1);
  EXPECT_TRUE(p.same_devices);
  // Each device's own half is a local copy; the two halves cross one after the other (a copy
  // occupies both ends).
  ASSERT_EQ(p.copies.size(), 4u);
  EXPECT_NEAR(p.direct.span_s, 2 * leg(kRows / 2), 1e-9);
  EXPECT_NEAR(p.host_relay.span_s, leg(kRows / 2) + leg(kRows), 1e-9);
  EXPECT_EQ(p.route, Route::direct);
}

TEST(HandoffRoute, FourDevicesAllGatherThroughHostMemoryAndTheScheduleMeetsTheBusiestDevice) {
  const hw::Topology t = gpus(4, true);
  const RoutePlan p = plan_route(t, halves(4), every_row(0, 4), kRowBytes, 1);
  // Direct: each device sends 3 quarters and receives 3 (6 legs); list scheduling pairs disjoint
  // devices, so the span is the busiest device's time. Relay: a quarter up, everything down.
  EXPECT_NEAR(p.direct.span_s, 6 * leg(kRows / 4), 1e-9);
  EXPECT_NEAR(p.direct.span_s, p.direct.senders_s, 1e-12);
  EXPECT_NEAR(p.host_relay.span_s, leg(kRows / 4) + leg(kRows), 1e-9);
  EXPECT_EQ(p.route, Route::host_relay);
}

TEST(HandoffRoute, WithoutPeerToPeerDirectCopiesAreStagedAndLose) {
  const hw::Topology t = gpus(2, false);
  const RoutePlan p = plan_route(t, halves(2), every_row(0, 2), kRowBytes, 1);
  // Each crossing half goes up and down: 2 legs, twice.
  EXPECT_NEAR(p.direct.span_s, 4 * leg(kRows / 2), 1e-9);
  EXPECT_EQ(p.route, Route::host_relay);
}

TEST(HandoffRoute, HalosAreSwappedDirectly) {
  const hw::Topology t = gpus(2, true);
  const std::int64_t halo = 2048;
  const std::vector<RouteEnd> need{{0, {0, kRows / 2 + halo}}, {1, {kRows / 2 - halo, kRows}}};
  const RoutePlan p = plan_route(t, halves(2), need, kRowBytes, 3);
  // Three tensors (Q, K, V): three legs of a third of the halo each way.
  EXPECT_NEAR(p.direct.span_s, 2 * 3 * (kLatency + halo * kRowBytes / 3 / kX16), 1e-9);
  EXPECT_EQ(p.route, Route::direct);
}

// ---- The transfer engine executes the route, with the data intact ----

std::vector<float> iota_rows(std::int64_t lo, std::int64_t hi, std::int64_t cols) {
  std::vector<float> v;
  for (std::int64_t r = lo; r < hi; ++r)
    for (std::int64_t c = 0; c < cols; ++c) v.push_back(static_cast<float>(r * 1000 + c));
  return v;
}

Shard shard_on(hw::Device* d, std::int64_t lo, std::int64_t hi, std::int64_t cols) {
  Shard s;
  s.device = d;
  s.held_lo = s.own_lo = s.valid_lo = lo;
  s.held_hi = s.own_hi = s.valid_hi = hi;
  const std::vector<float> v = iota_rows(lo, hi, cols);
  hw::BufferPtr b = d->allocate(v.size() * sizeof(float));
  d->copy_from_host(*b, std::as_bytes(std::span<const float>(v)));
  s.tensors.push_back(std::move(b));
  return s;
}

void expect_rows(const Shard& s, std::int64_t cols) {
  std::vector<float> got(static_cast<std::size_t>(s.held_rows() * cols));
  s.device->copy_to_host(*s.tensors.at(0), std::as_writable_bytes(std::span<float>(got)));
  EXPECT_EQ(got, iota_rows(s.held_lo, s.held_hi, cols)) << s.device->name() << " rows " << s.held_lo << ".." << s.held_hi;
}

Need need(hw::Device* d, std::int64_t lo, std::int64_t hi, std::int64_t own_lo, std::int64_t own_hi) {
  return {d, lo, hi, own_lo, own_hi};
}

TEST(HandoffRoute, EngineSwapsTwoHalvesPeerToPeer) {
  auto sys = testing::emu_system(2, 0);
  auto g = sys.devices_of(hw::DeviceKind::gpu);
  constexpr std::int64_t rows = 64, cols = 8;
  Activation a;
  a.rows = rows;
  a.cols = {cols};
  a.shards.push_back(shard_on(g[0], 0, 32, cols));
  a.shards.push_back(shard_on(g[1], 32, 64, cols));
  TransferCounters tc;
  const Activation out = TransferEngine{}.redistribute(std::move(a), {need(g[0], 0, rows, 0, 32), need(g[1], 0, rows, 32, 64)}, tc);
  EXPECT_EQ(tc.staged_copies, 0);
  EXPECT_EQ(tc.p2p_copies, 2);  // one half each way
  EXPECT_EQ(tc.moves, 2);       // each device's own half, locally
  for (const Shard& s : out.shards) expect_rows(s, cols);
}

TEST(HandoffRoute, EngineRelaysOneSendersRowsThroughHostMemoryToTwoReaders) {
  auto sys = testing::emu_system(3, 0);
  auto g = sys.devices_of(hw::DeviceKind::gpu);
  constexpr std::int64_t rows = 64, cols = 8;
  Activation a;
  a.rows = rows;
  a.cols = {cols};
  a.shards.push_back(shard_on(g[0], 0, rows, cols));
  TransferCounters tc;
  const Activation out = TransferEngine{}.redistribute(std::move(a), {need(g[1], 0, rows, 0, 32), need(g[2], 0, rows, 32, 64)}, tc);
  EXPECT_EQ(tc.p2p_copies, 0);
  EXPECT_EQ(tc.staged_copies, 3);  // up once, down twice
  for (const Shard& s : out.shards) expect_rows(s, cols);
}

TEST(HandoffRoute, EngineSendsHalosDirectlyAtTheirOffsets) {
  auto sys = testing::emu_system(3, 0);
  auto g = sys.devices_of(hw::DeviceKind::gpu);
  // Halos small against the shards (the relay would move every shard), large against the latency.
  constexpr std::int64_t rows = 60000, cols = 64, halo = 100;
  Activation a;
  a.rows = rows;
  a.cols = {cols};
  for (int j = 0; j < 3; ++j) a.shards.push_back(shard_on(g[static_cast<std::size_t>(j)], 20000 * j, 20000 * (j + 1), cols));
  std::vector<Need> needs;
  for (int j = 0; j < 3; ++j)
    needs.push_back(need(g[static_cast<std::size_t>(j)], std::max<std::int64_t>(0, 20000 * j - halo),
                         std::min<std::int64_t>(rows, 20000 * (j + 1) + halo), 20000 * j, 20000 * (j + 1)));
  TransferCounters tc;
  const Activation out = TransferEngine{}.redistribute(std::move(a), needs, tc);
  EXPECT_EQ(tc.staged_copies, 0);
  EXPECT_EQ(tc.p2p_copies, 4);  // each inner edge, both ways
  EXPECT_DOUBLE_EQ(tc.bytes, 4.0 * halo * cols * sizeof(float));
  for (const Shard& s : out.shards) expect_rows(s, cols);
}

}  // namespace
}  // namespace dype::rt
