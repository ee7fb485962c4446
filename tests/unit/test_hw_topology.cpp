// Topology transfer estimates: P2P vs host-staged, aggregate bandwidth of the devices involved,
// the inter-socket cap (DyPe paper Section III-B).
#include <vector>

#include <gtest/gtest.h>

#include "hw/topology.h"
#include "common/error.h"

namespace {

using namespace dype::hw;

Topology paper(int generation = 4, LinkType type = LinkType::pcie, double inter_socket = 128e9) {
  Topology t(2, inter_socket);
  for (int i = 0; i < 2; ++i) t.add_device({"gpu" + std::to_string(i), 0, {type, generation, 16}, true});
  for (int i = 0; i < 3; ++i) t.add_device({"fpga" + std::to_string(i), 1, {type, generation, 8}, true});
  Link host;
  host.type = LinkType::host;
  t.add_device({"cpu0", 0, host, false});
  return t;
}

constexpr std::size_t kBytes = 1ull << 30;

TEST(Topology, LaneBandwidths) {
  EXPECT_NEAR(Link({LinkType::pcie, 4, 16}).bandwidth_bytes_per_s(), 31.5077e9, 1e6);  // paper: 31.52
  EXPECT_NEAR(Link({LinkType::pcie, 4, 8}).bandwidth_bytes_per_s(), 15.7538e9, 1e6);   // paper: 15.76
  EXPECT_NEAR(Link({LinkType::pcie, 5, 16}).bandwidth_bytes_per_s(), 63.015e9, 1e7);
  EXPECT_NEAR(Link({LinkType::cxl, 3, 16}).bandwidth_bytes_per_s(), 121.0e9, 1e7);
}

TEST(Topology, P2pBeatsStagedAndIsLimitedBySlowerSide) {
  const Topology t = paper();
  const std::vector<int> g0{0}, f0{2};
  const auto p2p = t.estimate(g0, f0, kBytes, TransferPath::p2p);
  const auto staged = t.estimate(g0, f0, kBytes, TransferPath::host_staged);
  // One x16 GPU to one x8 FPGA: the FPGA's 15.75 GB/s bounds it.
  EXPECT_NEAR(p2p.bandwidth_bytes_per_s, 15.7538e9, 1e6);
  EXPECT_TRUE(p2p.crosses_socket);
  EXPECT_NEAR(p2p.time_s, 2e-6 + kBytes / 15.7538e9, 1e-6);
  // Staged: GPU -> host at 31.5, host -> FPGA at 15.75, one after the other.
  EXPECT_NEAR(staged.time_s, 4e-6 + kBytes / 31.5077e9 + kBytes / 15.7538e9, 1e-6);
  EXPECT_LT(p2p.time_s, staged.time_s);
  const auto best = t.estimate(g0, f0, kBytes);
  EXPECT_EQ(best.path, TransferPath::p2p);
}

TEST(Topology, AggregateBandwidthOfDevicesInvolved) {
  const Topology t = paper();
  const std::vector<int> f3{2, 3, 4}, g2{0, 1}, g1{0};
  // 3 FPGAs (3 x 15.75 = 47.3) -> 2 GPUs (2 x 31.5 = 63): the FPGAs' sum bounds.
  EXPECT_NEAR(t.estimate(f3, g2, kBytes).bandwidth_bytes_per_s, 3 * 15.7538e9, 1e6);
  // 3 FPGAs -> 1 GPU: the GPU's 31.5 bounds.
  EXPECT_NEAR(t.estimate(f3, g1, kBytes).bandwidth_bytes_per_s, 31.5077e9, 1e6);
  // More devices, less time.
  EXPECT_LT(t.estimate(f3, g2, kBytes).time_s, t.estimate(std::vector<int>{2}, g2, kBytes).time_s);
}

TEST(Topology, CrossSocketCap) {
  // CXL 3.0: 2 GPUs x 121 GB/s on one side, 3 FPGAs x 60.5 on the other: 181 GB/s, capped at 128.
  const Topology t = paper(3, LinkType::cxl);
  const std::vector<int> f3{2, 3, 4}, g2{0, 1};
  const auto e = t.estimate(g2, f3, kBytes, TransferPath::p2p);
  EXPECT_TRUE(e.crosses_socket);
  EXPECT_NEAR(e.bandwidth_bytes_per_s, 128e9, 1.0);
  // Same-socket transfers are not capped: GPU0 -> GPU1 at the full CXL link.
  const auto same = t.estimate(std::vector<int>{0}, std::vector<int>{1}, kBytes, TransferPath::p2p);
  EXPECT_FALSE(same.crosses_socket);
  EXPECT_NEAR(same.bandwidth_bytes_per_s, 121.0e9, 1e7);
  // A slow inter-socket link caps a PCIe transfer too.
  const Topology slow = paper(4, LinkType::pcie, 10e9);
  EXPECT_NEAR(slow.estimate(g2, f3, kBytes, TransferPath::p2p).bandwidth_bytes_per_s, 10e9, 1.0);
}

TEST(Topology, CpuIsNeverP2pAndLocalIsFree) {
  const Topology t = paper();
  const std::vector<int> cpu{5}, g0{0};
  EXPECT_FALSE(t.p2p_possible(cpu, g0));
  EXPECT_EQ(t.estimate(g0, cpu, kBytes).path, TransferPath::host_staged);
  EXPECT_THROW(t.estimate(g0, cpu, kBytes, TransferPath::p2p), dype::Error);
  const auto local = t.estimate(g0, g0, kBytes);
  EXPECT_EQ(local.path, TransferPath::local);
  EXPECT_EQ(local.time_s, 0.0);
}

TEST(Topology, NoP2pFlagMeansStaged) {
  Topology t(1, 128e9);
  t.add_device({"a", 0, {LinkType::pcie, 4, 16}, true});
  t.add_device({"b", 0, {LinkType::pcie, 4, 16}, false});
  EXPECT_EQ(t.estimate(std::vector<int>{0}, std::vector<int>{1}, kBytes).path, TransferPath::host_staged);
}

}  // namespace
