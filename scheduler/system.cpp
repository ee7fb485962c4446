#include "scheduler/system.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "hw/config_node.h"
#include "common/error.h"

namespace dype::sched {

int SystemSpec::kind_index(std::string_view name) const {
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int SystemSpec::host_index(std::string_view name) const {
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string SystemSpec::host_name(int kind) const {
  const int h = kinds[static_cast<std::size_t>(kind)].host_index;
  return hosts.empty() ? std::string() : hosts[static_cast<std::size_t>(h)].name;
}

std::string SystemSpec::where(int kind) const {
  const std::string& k = kinds[static_cast<std::size_t>(kind)].name;
  return hosts.empty() ? k : host_name(kind) + ":" + k;
}

int SystemSpec::total_devices() const {
  int total = 0;
  for (const auto& k : kinds) total += k.count;
  return total;
}

void SystemSpec::validate(const std::string& where) const {
  if (kinds.empty()) throw InputError(where, "no device kinds");
  if (kinds.size() > 32) throw InputError(where, "more than 32 device kinds");
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const auto& k = kinds[i];
    const std::string at = where + ".kinds[" + std::to_string(i) + "] (" + k.name + ")";
    if (k.name.empty()) throw InputError(at, "empty name");
    if (kind_index(k.name) != static_cast<int>(i)) throw InputError(at, "duplicate kind name");
    if (k.count < 0) throw InputError(at + ".count", "negative device count");
    const auto& p = k.power;
    if (!(p.idle_w >= 0)) throw InputError(at + ".power.idle_w", "must be >= 0");
    if (!(p.exec_w >= p.idle_w)) throw InputError(at + ".power.exec_w", "must be >= idle_w");
    if (!(p.xfer_w >= p.idle_w)) throw InputError(at + ".power.xfer_w", "must be >= idle_w");
    if (!(k.link_bw_bytes_per_s > 0)) throw InputError(at + ".link.bw", "must be > 0");
    if (!(k.link_latency_s >= 0)) throw InputError(at + ".link.latency", "must be >= 0");
    const int host_count = std::max<int>(1, static_cast<int>(hosts.size()));
    if (k.host_index < 0 || k.host_index >= host_count)
      throw InputError(at + ".on_host", "no host " + std::to_string(k.host_index) + " (the system lists " +
                                            std::to_string(hosts.size()) + ")");
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const auto& h = hosts[i];
    const std::string at = where + ".hosts[" + std::to_string(i) + "] (" + h.name + ")";
    if (h.name.empty()) throw InputError(at + ".name", "empty name");
    if (host_index(h.name) != static_cast<int>(i)) throw InputError(at + ".name", "duplicate host name");
    if (!(h.nic_bw_bytes_per_s > 0)) throw InputError(at + ".nic_gbit_per_s", "must be > 0");
    if (!(h.nic_latency_s >= 0)) throw InputError(at + ".nic_latency_us", "must be >= 0");
  }
  if (!(inter_socket_bw_bytes_per_s > 0)) throw InputError(where + ".inter_socket_bw", "must be > 0");
}

double SystemSpec::transfer_time_s(double bytes, DeviceGroup from, DeviceGroup to) const {
  if (bytes <= 0) return 0.0;
  const DeviceKindSpec& a = kinds[from.kind];
  const DeviceKindSpec& b = kinds[to.kind];
  const double bw_a = from.count * a.link_bw_bytes_per_s;  // aggregate: all devices move a slice
  const double bw_b = to.count * b.link_bw_bytes_per_s;
  if (a.host_index != b.host_index) {
    // Across hosts: up to the sender's host memory, over the NICs, down from the receiver's.
    const double up = a.host ? 0.0 : a.link_latency_s + bytes / bw_a;
    const double down = b.host ? 0.0 : b.link_latency_s + bytes / bw_b;
    return up + nic_time_s(bytes, a.host_index, b.host_index) + down;
  }
  const bool cross = a.socket != b.socket;
  const double socket_s = cross ? bytes / inter_socket_bw_bytes_per_s : 0.0;
  if (a.host && b.host) return socket_s + (cross ? 0.0 : bytes / std::min(bw_a, bw_b));
  if (a.host || b.host) {
    const double dev_bw = a.host ? bw_b : bw_a;
    const double lat = a.host ? b.link_latency_s : a.link_latency_s;
    return lat + std::max(bytes / dev_bw, socket_s);
  }
  if (a.p2p && b.p2p) {
    // One DMA hop; the root complexes forward it, the slower side or the socket link bounds it.
    return std::max(a.link_latency_s, b.link_latency_s) +
           std::max(bytes / std::min(bw_a, bw_b), socket_s);
  }
  // Staged: device -> pinned host buffer -> device, one after the other.
  return a.link_latency_s + b.link_latency_s + bytes / bw_a + bytes / bw_b + socket_s;
}

double SystemSpec::nic_time_s(double bytes, int host_a, int host_b) const {
  if (host_a == host_b || bytes <= 0) return 0.0;
  const HostSpec& a = hosts[static_cast<std::size_t>(host_a)];
  const HostSpec& b = hosts[static_cast<std::size_t>(host_b)];
  return a.nic_latency_s + b.nic_latency_s + bytes / std::min(a.nic_bw_bytes_per_s, b.nic_bw_bytes_per_s);
}

namespace {

void set_gflops(DeviceKindSpec& k, kernels::OpKind op, double v) {
  k.gflops[static_cast<std::size_t>(op)] = v;
}

}  // namespace

SystemSpec paper_testbed(bool with_cpu) {
  using kernels::OpKind;
  SystemSpec s;
  s.name = with_cpu ? "paper-testbed+cpu" : "paper-testbed";
  s.inter_socket_bw_bytes_per_s = 128e9;
  // Alveo U280 (Table II: 19.5 W static, +55 W running SpMM). Effective rates are rough rooflines
  // of Sextans SpMM (640 MACs at 215 MHz) and SWAT attention: modelled, for demos and benchmarks.
  DeviceKindSpec fpga{.name = "fpga", .letter = 'F', .count = 3,
                      .power = {.idle_w = 19.5, .exec_w = 74.5, .xfer_w = 30.0},
                      .link_bw_bytes_per_s = 15.76e9, .link_latency_s = 10e-6, .socket = 1,
                      .p2p = true, .host = false, .gflops = {}};
  set_gflops(fpga, OpKind::spmm, 250);
  set_gflops(fpga, OpKind::gemm, 120);
  set_gflops(fpga, OpKind::window_attention, 600);
  // MI210 (Table II: 45 W static, +300 W dynamic), PCIe 4.0 x16.
  DeviceKindSpec gpu{.name = "gpu", .letter = 'G', .count = 2,
                     .power = {.idle_w = 45.0, .exec_w = 345.0, .xfer_w = 90.0},
                     .link_bw_bytes_per_s = 31.52e9, .link_latency_s = 8e-6, .socket = 0,
                     .p2p = true, .host = false, .gflops = {}};
  set_gflops(gpu, OpKind::spmm, 120);
  set_gflops(gpu, OpKind::gemm, 18000);
  set_gflops(gpu, OpKind::window_attention, 500);
  set_gflops(gpu, OpKind::softmax, 400);
  set_gflops(gpu, OpKind::layer_norm, 400);
  s.kinds = {fpga, gpu};
  if (with_cpu) {
    DeviceKindSpec cpu{.name = "cpu", .letter = 'C', .count = 1,
                       .power = {.idle_w = 90.0, .exec_w = 280.0, .xfer_w = 120.0},
                       .link_bw_bytes_per_s = 100e9, .link_latency_s = 1e-6, .socket = 0,
                       .p2p = false, .host = true, .gflops = {}};
    set_gflops(cpu, OpKind::spmm, 30);
    set_gflops(cpu, OpKind::gemm, 1500);
    set_gflops(cpu, OpKind::window_attention, 80);
    set_gflops(cpu, OpKind::softmax, 50);
    set_gflops(cpu, OpKind::layer_norm, 50);
    s.kinds.push_back(cpu);
  }
  s.op_kind[static_cast<std::size_t>(OpKind::spmm)] = 0;
  s.op_kind[static_cast<std::size_t>(OpKind::window_attention)] = 0;
  s.op_kind[static_cast<std::size_t>(OpKind::gemm)] = 1;
  s.op_kind[static_cast<std::size_t>(OpKind::softmax)] = 1;
  s.op_kind[static_cast<std::size_t>(OpKind::layer_norm)] = 1;
  return s;
}

// Format (all bandwidths in GB/s, latencies in microseconds, power in watts):
//   name: paper-testbed
//   inter_socket_gbps: 128
//   transfers: serial            # or overlap (SystemSpec::transfers; default serial, the paper's)
//   kinds:
//     - {name: fpga, letter: F, count: 3, socket: 1, p2p: true, link_gbps: 15.76, latency_us: 10,
//        power: {idle_w: 19.5, exec_w: 74.5, xfer_w: 30},
//        gflops: {spmm: 250, gemm: 120, window_attention: 600}}
//     - {name: cpu, letter: C, count: 1, host: true, link_gbps: 100, power: {...}}
//   baselines: {op_kind: {spmm: fpga, gemm: gpu}, static_counts: [2, 1, 1, 1]}
// Several hosts (optional; without `hosts:` the system is one host): NIC bandwidth in Gb/s (bits,
// as NICs are sold: 100 = 12.5e9 bytes/s), latency in microseconds at each end; a kind names its
// host with `on_host` (default: the first host, the coordinator).
//   hosts:
//     - {name: a, nic_gbit_per_s: 100, nic_latency_us: 3}
//     - {name: b, nic_gbit_per_s: 100, nic_latency_us: 3}
//   kinds:
//     - {name: fpga, on_host: b, ...}
// Unknown keys are errors (a misspelt `p2p` must not silently mean false); every error names the
// file and the key path.
std::string_view to_string(TransferMode mode) { return mode == TransferMode::overlap ? "overlap" : "serial"; }

namespace {
TransferMode parse_transfer_mode(const hw::ConfigNode& node) {
  const std::string v = node.as_string();
  if (v == "serial") return TransferMode::serial;
  if (v == "overlap") return TransferMode::overlap;
  node.fail("must be serial or overlap, got '" + v + "'");
}
}  // namespace

SystemSpec parse_system_spec(const std::string& yaml_text, const std::string& source) {
  const hw::ConfigNode root = hw::ConfigNode::parse(yaml_text, source);
  root.expect_keys({"name", "inter_socket_gbps", "transfers", "hosts", "kinds", "baselines"});
  SystemSpec s;
  s.name = root.get_string("name", "system");
  if (auto t = root.optional_child("transfers")) s.transfers = parse_transfer_mode(*t);
  s.inter_socket_bw_bytes_per_s = root.get_positive("inter_socket_gbps", 128.0) * 1e9;
  if (const auto hosts = root.optional_child("hosts")) {
    hosts->expect_sequence();
    if (hosts->size() == 0) hosts->fail("lists no host (leave it out for one host)");
    for (std::size_t i = 0; i < hosts->size(); ++i) {
      const hw::ConfigNode h = hosts->at(i);
      h.expect_keys({"name", "nic_gbit_per_s", "nic_latency_us"});
      HostSpec host;
      host.name = h.get_string("name");
      if (host.name.empty()) h.child("name").fail("empty host name");
      if (s.host_index(host.name) >= 0) h.child("name").fail("duplicate host name '" + host.name + "'");
      host.nic_bw_bytes_per_s = h.get_positive("nic_gbit_per_s") * 1e9 / 8.0;
      host.nic_latency_s = h.get_positive("nic_latency_us", 0.0, /*allow_zero=*/true) * 1e-6;
      s.hosts.push_back(host);
    }
  }
  const hw::ConfigNode kinds = root.child("kinds");
  kinds.expect_sequence();
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const hw::ConfigNode k = kinds.at(i);
    k.expect_keys({"name", "letter", "count", "socket", "p2p", "host", "on_host", "link_gbps", "latency_us", "power",
                   "gflops"});
    DeviceKindSpec d;
    d.name = k.get_string("name", "");
    const std::string letter = k.get_string("letter", d.name.empty() ? "?" : d.name.substr(0, 1));
    d.letter = static_cast<char>(std::toupper(static_cast<unsigned char>(letter.empty() ? '?' : letter[0])));
    d.count = static_cast<int>(k.get_int("count", 0));
    d.socket = static_cast<int>(k.get_int("socket", 0));
    d.p2p = k.get_bool("p2p", false);
    d.host = k.get_bool("host", false);
    if (const auto on = k.optional_child("on_host")) {
      const std::string host = on->as_string();
      d.host_index = s.host_index(host);
      if (d.host_index < 0)
        on->fail("unknown host '" + host + "'" + (s.hosts.empty() ? " (the system lists no hosts:)" : ""));
    }
    d.link_bw_bytes_per_s = k.get_double("link_gbps", 0.0) * 1e9;
    d.link_latency_s = k.get_double("latency_us", 0.0) * 1e-6;
    if (const auto p = k.optional_child("power")) {
      p->expect_keys({"idle_w", "exec_w", "xfer_w"});
      d.power.idle_w = p->get_double("idle_w", 0.0);
      d.power.exec_w = p->get_double("exec_w", d.power.idle_w);
      d.power.xfer_w = p->get_double("xfer_w", d.power.idle_w);
    }
    if (const auto g = k.optional_child("gflops")) {
      g->expect_map();
      for (const auto& it : g->yaml()) {
        const auto key = it.first.as<std::string>();
        const auto op = kernels::op_kind_from_string(key);
        if (!op) g->child(key).fail("unknown op");
        d.gflops[static_cast<std::size_t>(*op)] = g->get_positive(key, /*allow_zero=*/true);
      }
    }
    s.kinds.push_back(d);
  }
  if (const auto b = root.optional_child("baselines")) {
    b->expect_keys({"op_kind", "static_counts"});
    if (const auto m = b->optional_child("op_kind")) {
      m->expect_map();
      for (const auto& it : m->yaml()) {
        const auto key = it.first.as<std::string>();
        const hw::ConfigNode entry = m->child(key);
        const auto op = kernels::op_kind_from_string(key);
        if (!op) entry.fail("unknown op");
        const std::string kind_name = entry.as_string();
        const int kind = s.kind_index(kind_name);
        if (kind < 0) entry.fail("unknown device kind '" + kind_name + "'");
        s.op_kind[static_cast<std::size_t>(*op)] = kind;
      }
    }
    if (const auto c = b->optional_child("static_counts")) {
      c->expect_sequence();
      for (std::size_t i = 0; i < c->size(); ++i) {
        const hw::ConfigNode n = c->at(i);
        const std::int64_t v = n.as_int();
        if (v < 0) n.fail("must be >= 0, got " + std::to_string(v));
        s.static_counts.push_back(static_cast<int>(v));
      }
    }
  }
  s.validate(source);
  return s;
}

SystemSpec load_system_spec(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open system file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_system_spec(ss.str(), path);
}

}  // namespace dype::sched
