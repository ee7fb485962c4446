#include "hw/system_file.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "common/error.h"
#include "hw/config_parse.h"
#include "hw/registry.h"

namespace dype::hw {

namespace {

// A system file may name any backend dype knows, compiled into this build or not: a device of a
// backend this build lacks is planned from its model, and System::from_config says what to
// configure to run it.
bool is_backend_name(const std::string& name) {
  const auto& known = backend_names();
  return std::find(known.begin(), known.end(), name) != known.end();
}

std::string backend_list() {
  std::string out;
  for (const std::string& name : backend_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

SystemConfig load_system_config(const std::string& path) {
  const ConfigNode root = ConfigNode::load_file(path);
  root.expect_keys({"system", "topology", "timing_only", "transfers", "jitter", "devices", "power",
                    "baselines", "hosts"});
  SystemConfig cfg;
  cfg.file = path;
  const auto sys = root.child("system");
  sys.expect_keys({"name", "description"});
  cfg.name = sys.get_string("name");
  cfg.description = sys.get_string("description", "");

  if (auto topo = root.optional_child("topology")) {
    topo->expect_keys({"sockets", "inter_socket_gbps"});
    const auto s = topo->get_int("sockets", 1);
    if (s < 1 || s > 16) topo->child("sockets").fail("must be 1-16, got " + std::to_string(s));
    cfg.sockets = static_cast<int>(s);
    cfg.inter_socket_bytes_per_s = topo->get_positive("inter_socket_gbps", 128.0) * 1e9;
  }
  cfg.timing_only = root.get_bool("timing_only", false);
  std::optional<bool> overlap;
  if (auto t = root.optional_child("transfers")) {
    const std::string v = t->as_string();
    if (v != "serial" && v != "overlap") t->fail("must be serial or overlap, got '" + v + "'");
    overlap = v == "overlap";
  }
  if (auto j = root.optional_child("jitter")) {
    j->expect_keys({"sigma", "seed"});
    cfg.jitter_sigma = j->get_positive("sigma", 0.0, true);
    if (cfg.jitter_sigma >= 0.5) j->child("sigma").fail("must be < 0.5 (relative std-dev)");
    cfg.jitter_seed = static_cast<std::uint64_t>(j->get_int("seed", 1));
  }

  // Per-kind power overrides, applied after each device's model.
  std::map<DeviceKind, ConfigNode> kind_power;
  if (auto p = root.optional_child("power")) {
    p->expect_keys({"cpu", "gpu", "fpga"});
    for (DeviceKind k : {DeviceKind::cpu, DeviceKind::gpu, DeviceKind::fpga}) {
      if (auto n = p->optional_child(to_string(k))) kind_power.emplace(k, *n);
    }
  }

  // Baseline plans' fixed mappings (scheduler baselines `static` and `fleetrec`); names are
  // checked against the device kinds by the scheduler adapter, which knows which kinds exist.
  if (auto b = root.optional_child("baselines")) {
    b->expect_keys({"op_kind", "static_counts"});
    if (auto m = b->optional_child("op_kind")) {
      m->expect_map();
      for (const auto& it : m->yaml()) {
        const std::string op = it.first.as<std::string>();
        const auto node = m->child(op);
        if (!kernels::op_kind_from_string(op)) node.fail("unknown op '" + op + "'");
        const std::string kind = node.as_string();
        if (!device_kind_from_string(kind))
          node.fail("must be cpu, gpu or fpga, got '" + kind + "'");
        cfg.baseline_op_kind[op] = kind;
      }
    }
    if (auto c = b->optional_child("static_counts")) {
      c->expect_sequence();
      for (std::size_t i = 0; i < c->size(); ++i) {
        const auto v = c->at(i).as_int();
        if (v < 1) c->at(i).fail("must be >= 1, got " + std::to_string(v));
        cfg.baseline_static_counts.push_back(static_cast<int>(v));
      }
    }
  }

  if (auto hs = root.optional_child("hosts")) {
    hs->expect_sequence();
    std::set<std::string> host_names;
    for (std::size_t i = 0; i < hs->size(); ++i) {
      const auto h = hs->at(i);
      h.expect_keys({"name", "address", "nic_gbit_per_s", "nic_latency_us"});
      HostConfig hc;
      hc.name = h.get_string("name");
      if (hc.name.empty() || hc.name.find_first_of(":@/ ") != std::string::npos)
        h.child("name").fail("must be a non-empty name without ':', '@', '/' or spaces, got '" +
                             hc.name + "'");
      if (!host_names.insert(hc.name).second)
        h.child("name").fail("duplicate host name '" + hc.name + "'");
      if (i > 0 && h.has("address")) {
        // Without one the host joins (dype-serve --join) and is left out of plans until it does.
        hc.address = h.get_string("address");
        if (!is_host_port(hc.address))
          h.child("address").fail("must be HOST:PORT, got '" + hc.address + "'");
      } else if (h.has("address")) {
        hc.address = h.get_string("address");  // this machine's: informational
      }
      hc.nic_bytes_per_s = h.get_positive("nic_gbit_per_s", 100.0) * 1e9 / 8.0;
      hc.nic_latency_s = h.get_positive("nic_latency_us", 3.0, true) * 1e-6;
      cfg.hosts.push_back(std::move(hc));
    }
    if (cfg.hosts.empty()) hs->fail("must list at least the coordinator when present");
  }

  const auto devs = root.child("devices");
  devs.expect_sequence();
  if (devs.size() == 0) devs.fail("must list at least one device");
  std::set<std::string> names;
  for (std::size_t i = 0; i < devs.size(); ++i) {
    const auto n = devs.at(i);
    n.expect_keys({"name", "backend", "model", "socket", "link", "p2p", "bitstream", "timing_only",
                   "threads", "schedulable", "power", "ordinal", "host"});
    DeviceConfig d;
    d.key_path = n.path();
    d.name = n.get_string("name");
    if (!names.insert(d.name).second)
      n.child("name").fail("duplicate device name '" + d.name + "'");
    const auto bn = n.child("backend");
    d.backend = bn.as_string();
    if (!is_backend_name(d.backend)) {
      bn.fail("must be one of " + backend_list() + ", got '" + d.backend + "'");
    }
    if (n.has("model")) {
      const auto mn = n.child("model");
      d.profile_file = resolve_config_path(path, mn.as_string());
      if (!std::filesystem::exists(d.profile_file)) mn.fail("file not found: " + d.profile_file);
      d.profile = load_device_profile(d.profile_file);
      d.kind = d.profile->kind;
      d.link = d.profile->link;
      d.power = d.profile->power;
    } else if (d.backend == "emu") {
      n.child("model");  // throws "required key missing" with the key path
    }
    if (d.backend == "cpu") {
      if (d.profile && d.kind != DeviceKind::cpu)
        n.child("model").fail("backend cpu needs a cpu model");
      d.kind = DeviceKind::cpu;
      d.link.type = LinkType::host;
      if (d.profile) d.link.host_bandwidth_bytes_per_s = d.profile->memory_bandwidth_bytes_per_s;
    }
    const auto socket = n.get_int("socket", 0);
    if (socket < 0 || socket >= cfg.sockets) {
      n.child("socket").fail("must be in [0, " + std::to_string(cfg.sockets) + "), got " +
                             std::to_string(socket));
    }
    d.socket = static_cast<int>(socket);
    if (auto l = n.optional_child("link")) {
      if (d.backend == "cpu") l->fail("the cpu is reached through host memory and has no link");
      d.link = parse_link(*l, d.link);
    }
    d.p2p = n.get_bool("p2p", false);
    if (d.p2p && d.kind == DeviceKind::cpu) n.child("p2p").fail("a cpu cannot do peer-to-peer");
    if (auto b = n.optional_child("bitstream")) {
      if (d.kind != DeviceKind::fpga) b->fail("only FPGAs take a bitstream");
      d.bitstream_file = resolve_config_path(path, b->as_string());
      if (!std::filesystem::exists(d.bitstream_file))
        b->fail("file not found: " + d.bitstream_file);
      d.bitstream = load_bitstream(d.bitstream_file);
      if (d.profile && d.bitstream->profile_id != d.profile->id) {
        b->fail("bitstream is built for '" + d.bitstream->profile_id + "', device model is '" +
                d.profile->id + "'");
      }
    }
    d.timing_only = n.get_bool("timing_only", cfg.timing_only);
    d.threads = static_cast<int>(n.get_int("threads", 0));
    if (d.threads < 0) n.child("threads").fail("must be >= 0 (0 = all hardware threads)");
    d.ordinal = static_cast<int>(n.get_int("ordinal", 0));
    d.schedulable = n.get_bool("schedulable", d.kind != DeviceKind::cpu);
    if (auto h = n.optional_child("host")) {
      if (cfg.hosts.empty()) h->fail("the system lists no hosts");
      d.host = h->as_string();
      if (!cfg.find_host(d.host)) h->fail("no host named '" + d.host + "' in hosts");
    } else if (!cfg.hosts.empty()) {
      d.host = cfg.hosts[0].name;
    }
    if (!cfg.hosts.empty() && d.host != cfg.hosts[0].name && !d.profile)
      n.child("model");  // a device on another host is planned from its model: required
    if (auto it = kind_power.find(d.kind); it != kind_power.end()) {
      d.power = parse_power(it->second, d.power);
    }
    if (auto p = n.optional_child("power")) d.power = parse_power(*p, d.power);
    cfg.devices.push_back(std::move(d));
  }
  cfg.transfers_stated = overlap.has_value();
  if (overlap) {
    cfg.overlap_transfers = *overlap;
    cfg.transfers_why = "stated in " + path;
  } else {
    settle_transfers(cfg);
  }
  return cfg;
}

}  // namespace dype::hw
