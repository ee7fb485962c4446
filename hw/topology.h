#pragma once
// Topology: sockets (each a CPU with its PCIe root complex and host memory), the devices hanging
// off them with their links (PCIe 4.0/5.0, CXL 3.0; lanes), which devices can do peer-to-peer, and
// the inter-socket link. It answers "how long does moving B bytes from these devices to those take"
// for the transfer engine and for the scheduler's f_comm.
//
// The model (DyPe paper, Section III-B / Fig. 5): when n GPUs send to m FPGAs concurrently over
// P2P, the bandwidth is the combined bandwidth of the devices involved, i.e. min(sum of the
// senders' link bandwidths, sum of the receivers'); when the path crosses sockets it is further
// capped by the inter-socket link (128 GB/s on the paper's testbed). Without P2P the data goes
// device -> host memory -> device, two legs one after the other, each leg with the aggregate
// bandwidth of its side (the second leg also capped by the inter-socket link when the host buffer
// is on the other socket). Every transfer also pays the link latency once per leg.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dype::hw {

enum class LinkType { pcie, cxl, host };  // host: the CPU itself, reached through memory

struct Link {
  LinkType type = LinkType::pcie;
  int generation = 4;  // PCIe generation, or CXL major version (3 => PCIe 6.0 PHY)
  int lanes = 16;
  // Per-direction bandwidth, bytes/s, from generation and lanes; for `host` the memory bandwidth.
  double bandwidth_bytes_per_s() const;
  double latency_s = 2e-6;  // per transfer leg (DMA setup + flight)
  // What dype-calibrate measured per direction (pageable host memory, the slower direction), bytes/s;
  // 0: the nominal figure from generation and lanes. A real GPU's copies reach a fraction of it
  // (H200, PCIe 5.0 x16: 7-12 GB/s measured against 63 GB/s nominal).
  double measured_bytes_per_s = 0.0;
  double host_bandwidth_bytes_per_s = 100e9;  // used when type == host
};

// Per-lane, per-direction payload bandwidth in bytes/s: PCIe 3.0 8 GT/s 128b/130b = 0.985 GB/s,
// 4.0 = 1.97 GB/s (x16 = 31.52 GB/s, the paper's figure), 5.0 = 3.94 GB/s; CXL 3.0 runs on the
// PCIe 6.0 PHY: 64 GT/s PAM4 with 242/256 FLIT efficiency = 7.56 GB/s.
double lane_bandwidth_bytes_per_s(LinkType type, int generation);

std::string_view to_string(LinkType t);

struct TopologyDevice {
  std::string name;
  int socket = 0;
  Link link;
  bool p2p = false;  // can master/target peer-to-peer transfers (both ends must say so)
  int host = 0;      // index into Topology::hosts(); 0 is the coordinator, whose memory is "host"
};

// A machine of a multi-host system: its NIC. Host 0 is the coordinator: requests arrive in its
// memory and every hand-off to or from another host is relayed through it (a star).
struct HostNic {
  std::string name;
  double bytes_per_s = 12.5e9;  // 100 Gb/s
  double latency_s = 3e-6;      // per message, each end
};

enum class TransferPath { local, p2p, host_staged };
std::string_view to_string(TransferPath p);

struct TransferEstimate {
  TransferPath path = TransferPath::local;
  double time_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;  // effective end to end (bytes / time_s without latency)
  bool crosses_socket = false;
};

class Topology {
 public:
  Topology() = default;
  Topology(int sockets, double inter_socket_bytes_per_s)
      : sockets_(sockets), inter_socket_bytes_per_s_(inter_socket_bytes_per_s) {}

  // Returns the device's index (the id used in the queries below).
  int add_device(TopologyDevice device);
  const std::vector<TopologyDevice>& devices() const { return devices_; }
  const TopologyDevice& device(int index) const { return devices_.at(index); }
  int index_of(std::string_view name) const;  // -1 when absent
  int sockets() const { return sockets_; }
  double inter_socket_bytes_per_s() const { return inter_socket_bytes_per_s_; }

  bool p2p_possible(int src, int dst) const;
  // True when every (src, dst) pair can do P2P and no device is a CPU.
  bool p2p_possible(std::span<const int> src, std::span<const int> dst) const;

  // `bytes` in total leave the src set (split evenly) and arrive at the dst set (split evenly).
  // The fastest allowed path is used (P2P when possible); a set on one device to itself is local.
  TransferEstimate estimate(std::span<const int> src, std::span<const int> dst,
                            std::size_t bytes) const;
  // The same for a forced path (host_staged is always possible; p2p throws when not possible).
  TransferEstimate estimate(std::span<const int> src, std::span<const int> dst, std::size_t bytes,
                            TransferPath path) const;
  // Host <-> devices (one leg; host memory on each device's own socket, on the device's own host).
  TransferEstimate estimate_host_to(std::span<const int> dst, std::size_t bytes) const;
  TransferEstimate estimate_to_host(std::span<const int> src, std::size_t bytes) const;

  // Hosts (empty: one machine). Devices name theirs by index; add the hosts first.
  void set_hosts(std::vector<HostNic> hosts) { hosts_ = std::move(hosts); }
  const std::vector<HostNic>& hosts() const { return hosts_; }
  int host_of(int device) const { return this->device(device).host; }
  // `bytes` between the coordinator's memory and host `host`'s memory: both NICs' latencies and
  // the slower NIC's bandwidth; 0 for the coordinator itself or without hosts.
  double nic_leg_s(int host, double bytes) const;

 private:
  double aggregate_bytes_per_s(std::span<const int> set) const;
  bool crosses(std::span<const int> a, std::span<const int> b) const;
  double max_latency_s(std::span<const int> set) const;

  double nic_legs_s(std::span<const int> set, double bytes) const;

  int sockets_ = 1;
  double inter_socket_bytes_per_s_ = 128e9;
  std::vector<TopologyDevice> devices_;
  std::vector<HostNic> hosts_;
};

}  // namespace dype::hw
