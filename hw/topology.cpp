#include "hw/topology.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace dype::hw {

double lane_bandwidth_bytes_per_s(LinkType type, int generation) {
  if (type == LinkType::cxl) {
    // CXL 3.x rides the PCIe 6.0 PHY: 64 GT/s per lane, 256-byte FLITs carrying 242 payload bytes.
    if (generation >= 3) return 64e9 / 8.0 * 242.0 / 256.0;
    return 32e9 / 8.0 * 128.0 / 130.0;  // CXL 1.x/2.0 on PCIe 5.0
  }
  switch (generation) {
    case 1: return 2.5e9 / 8.0 * 0.8;   // 8b/10b
    case 2: return 5e9 / 8.0 * 0.8;
    case 3: return 8e9 / 8.0 * 128.0 / 130.0;
    case 4: return 16e9 / 8.0 * 128.0 / 130.0;
    case 5: return 32e9 / 8.0 * 128.0 / 130.0;
    default: return 64e9 / 8.0 * 242.0 / 256.0;  // 6.0 and later
  }
}

double Link::bandwidth_bytes_per_s() const {
  if (type == LinkType::host) return host_bandwidth_bytes_per_s;
  if (measured_bytes_per_s > 0) return measured_bytes_per_s;
  return lane_bandwidth_bytes_per_s(type, generation) * lanes;
}

std::string_view to_string(LinkType t) {
  switch (t) {
    case LinkType::pcie: return "pcie";
    case LinkType::cxl: return "cxl";
    case LinkType::host: return "host";
  }
  return "unknown";
}

std::string_view to_string(TransferPath p) {
  switch (p) {
    case TransferPath::local: return "local";
    case TransferPath::p2p: return "p2p";
    case TransferPath::host_staged: return "host-staged";
  }
  return "unknown";
}

int Topology::add_device(TopologyDevice device) {
  if (device.socket < 0 || device.socket >= sockets_) {
    throw InputError("topology: device " + device.name,
                     "socket " + std::to_string(device.socket) + " out of range [0, " +
                         std::to_string(sockets_) + ")");
  }
  if (index_of(device.name) >= 0) throw InputError("topology", "duplicate device " + device.name);
  if (device.host < 0 || (device.host > 0 && static_cast<std::size_t>(device.host) >= hosts_.size())) {
    throw InputError("topology: device " + device.name, "host " + std::to_string(device.host) + " is not one of the " +
                                                            std::to_string(hosts_.size()) + " hosts");
  }
  devices_.push_back(std::move(device));
  return static_cast<int>(devices_.size()) - 1;
}

int Topology::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool Topology::p2p_possible(int src, int dst) const {
  const auto& a = device(src);
  const auto& b = device(dst);
  // Peer-to-peer never crosses machines: a NIC sits between them.
  return a.p2p && b.p2p && a.link.type != LinkType::host && b.link.type != LinkType::host && a.host == b.host;
}

double Topology::nic_leg_s(int host, double bytes) const {
  if (host <= 0 || static_cast<std::size_t>(host) >= hosts_.size()) return 0.0;
  const HostNic& here = hosts_.front();
  const HostNic& there = hosts_[static_cast<std::size_t>(host)];
  return here.latency_s + there.latency_s + bytes / std::min(here.bytes_per_s, there.bytes_per_s);
}

// `bytes` split evenly over `set` crossing each remote host's NIC (its devices' shares share it):
// the slowest host's leg.
double Topology::nic_legs_s(std::span<const int> set, double bytes) const {
  if (hosts_.empty() || set.empty()) return 0.0;
  std::vector<int> per_host(hosts_.size(), 0);
  for (int i : set) ++per_host[static_cast<std::size_t>(device(i).host)];
  double t = 0.0;
  for (std::size_t h = 1; h < per_host.size(); ++h) {
    if (per_host[h] > 0) t = std::max(t, nic_leg_s(static_cast<int>(h), bytes * per_host[h] / static_cast<double>(set.size())));
  }
  return t;
}

bool Topology::p2p_possible(std::span<const int> src, std::span<const int> dst) const {
  for (int s : src) {
    for (int d : dst) {
      if (s != d && !p2p_possible(s, d)) return false;
    }
  }
  return true;
}

double Topology::aggregate_bytes_per_s(std::span<const int> set) const {
  double sum = 0.0;
  for (int i : set) sum += device(i).link.bandwidth_bytes_per_s();
  return sum;
}

bool Topology::crosses(std::span<const int> a, std::span<const int> b) const {
  for (int x : a) {
    for (int y : b) {
      if (device(x).socket != device(y).socket) return true;
    }
  }
  return false;
}

double Topology::max_latency_s(std::span<const int> set) const {
  double l = 0.0;
  for (int i : set) l = std::max(l, device(i).link.latency_s);
  return l;
}

namespace {
bool same_single(std::span<const int> a, std::span<const int> b) {
  if (a.empty() || b.empty()) return false;
  for (int x : a) {
    if (std::find(b.begin(), b.end(), x) == b.end()) return false;
  }
  for (int y : b) {
    if (std::find(a.begin(), a.end(), y) == a.end()) return false;
  }
  return true;
}
}  // namespace

TransferEstimate Topology::estimate(std::span<const int> src, std::span<const int> dst,
                                    std::size_t bytes) const {
  if (same_single(src, dst)) return estimate(src, dst, bytes, TransferPath::local);
  const auto staged = estimate(src, dst, bytes, TransferPath::host_staged);
  if (!p2p_possible(src, dst)) return staged;
  const auto p2p = estimate(src, dst, bytes, TransferPath::p2p);
  return p2p.time_s <= staged.time_s ? p2p : staged;
}

TransferEstimate Topology::estimate(std::span<const int> src, std::span<const int> dst,
                                    std::size_t bytes, TransferPath path) const {
  if (src.empty() || dst.empty()) throw Error("topology: transfer between empty device sets");
  TransferEstimate e;
  e.path = path;
  e.crosses_socket = crosses(src, dst);
  const double b = static_cast<double>(bytes);
  switch (path) {
    case TransferPath::local:
      // Data stays where it is (same devices on both sides).
      e.crosses_socket = false;
      e.bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
      e.time_s = 0.0;
      return e;
    case TransferPath::p2p: {
      if (!p2p_possible(src, dst)) throw Error("topology: P2P not possible between these devices");
      double bw = std::min(aggregate_bytes_per_s(src), aggregate_bytes_per_s(dst));
      if (e.crosses_socket) bw = std::min(bw, inter_socket_bytes_per_s_);
      e.bandwidth_bytes_per_s = bw;
      e.time_s = std::max(max_latency_s(src), max_latency_s(dst)) + b / bw;
      return e;
    }
    case TransferPath::host_staged: {
      // Leg 1: senders write to host memory on their own sockets; leg 2: receivers read it. When
      // senders and receivers sit on different sockets, leg 2 crosses the inter-socket link.
      const double bw1 = aggregate_bytes_per_s(src);
      double bw2 = aggregate_bytes_per_s(dst);
      if (e.crosses_socket) bw2 = std::min(bw2, inter_socket_bytes_per_s_);
      e.time_s = max_latency_s(src) + b / bw1 + max_latency_s(dst) + b / bw2;
      // Between machines the host memory in the middle is the coordinator's: each remote end's
      // NIC leg too (within one remote host its own memory, no NIC).
      bool one_host = true;
      for (int x : src)
        for (int y : dst) one_host &= device(x).host == device(y).host;
      if (!one_host) e.time_s += nic_legs_s(src, b) + nic_legs_s(dst, b);
      e.bandwidth_bytes_per_s = b > 0 ? b / (b / bw1 + b / bw2) : std::min(bw1, bw2) / 2;
      return e;
    }
  }
  return e;
}

TransferEstimate Topology::estimate_host_to(std::span<const int> dst, std::size_t bytes) const {
  if (dst.empty()) throw Error("topology: transfer to an empty device set");
  TransferEstimate e;
  e.path = TransferPath::host_staged;
  e.bandwidth_bytes_per_s = aggregate_bytes_per_s(dst);
  e.time_s = max_latency_s(dst) + static_cast<double>(bytes) / e.bandwidth_bytes_per_s;
  return e;
}

TransferEstimate Topology::estimate_to_host(std::span<const int> src, std::size_t bytes) const {
  return estimate_host_to(src, bytes);  // links are symmetric per direction
}

}  // namespace dype::hw
