#include "hw/system.h"

#include "hw/registry.h"
#include "common/error.h"

namespace dype::hw {

System::~System() = default;

System System::from_config(const SystemConfig& config) {
  System s;
  s.config_ = config;
  // A real accelerator the file gives no `model:` gets the profile detection would give it; every
  // real one reports its copy engines, which then decide transfers the file does not state.
  bool described = false;
  for (DeviceConfig& dc : s.config_.devices) {
    if (!config.remote_host(dc.name).empty()) continue;
    if (dc.profile && dc.copy_engines > 0) continue;  // detection already asked (System::detect)
    const Backend* backend = find_backend(dc.backend);
    if (!backend || !backend->describe) continue;
    const auto attrs = backend->describe(dc);
    if (!attrs) continue;
    described = true;
    if (dc.profile) {
      dc.copy_engines = attrs->copy_engines;
      continue;
    }
    const PowerStates stated = dc.power;
    const bool power_stated = stated.idle_w != PowerStates{}.idle_w || stated.execute_w != PowerStates{}.execute_w ||
                              stated.transfer_w != PowerStates{}.transfer_w;
    apply_detected_profile(dc, *attrs, /*keep_link=*/true);
    if (power_stated) dc.power = stated;
  }
  if (described) settle_transfers(s.config_);
  s.topology_ = std::make_unique<Topology>(config.sockets, config.inter_socket_bytes_per_s);
  std::vector<HostNic> nics;
  for (const auto& h : config.hosts) nics.push_back({h.name, h.nic_bytes_per_s, h.nic_latency_s});
  s.topology_->set_hosts(std::move(nics));
  for (const auto& dc : s.config_.devices) {
    // A device on another host is planned here from its model (an emulated stand-in that never
    // runs a kernel: its stages run on that host, runtime/remote/).
    const bool remote = !s.config_.remote_host(dc.name).empty();
    const Backend* backend = find_backend(remote ? "emu" : dc.backend);
    const std::string where = (config.file.empty() ? "system" : config.file) + ": " + dc.key_path;
    if (!backend) {
      throw InputError(where + ".backend", "backend '" + dc.backend +
                                               "' is not compiled into this build (configure with "
                                               "DYPE_WITH_<BACKEND>=ON)");
    }
    DevicePtr dev = backend->create(dc, s.config_);
    const int index = s.topology_->add_device({dc.name, dc.socket, dc.link, dc.p2p, s.config_.host_index(dc.host)});
    dev->attach(s.topology_.get(), index);
    s.views_.push_back(dev.get());
    s.devices_.push_back(std::move(dev));
  }
  return s;
}

std::vector<Device*> System::devices_of(DeviceKind kind) const {
  std::vector<Device*> out;
  for (Device* d : views_) {
    if (d->kind() == kind) out.push_back(d);
  }
  return out;
}

Device* System::find(std::string_view name) const {
  for (Device* d : views_) {
    if (d->name() == name) return d;
  }
  return nullptr;
}

Device& System::device(std::string_view name) const {
  if (Device* d = find(name)) return *d;
  throw InputError(config_.file.empty() ? "system" : config_.file,
                   "no device named '" + std::string(name) + "'");
}

std::vector<int> System::indices(std::initializer_list<std::string_view> names) const {
  std::vector<int> out;
  for (auto n : names) out.push_back(device(n).topology_index());
  return out;
}

std::vector<int> System::indices(std::span<Device* const> devices) const {
  std::vector<int> out;
  for (Device* d : devices) out.push_back(d->topology_index());
  return out;
}

}  // namespace dype::hw
