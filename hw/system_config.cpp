#include "hw/system_config.h"

#include <cstdlib>
#include <filesystem>

#include "hw/config_parse.h"
#include "common/error.h"

namespace dype::hw {

const DeviceConfig* SystemConfig::find(const std::string& device_name) const {
  for (const auto& d : devices) {
    if (d.name == device_name) return &d;
  }
  return nullptr;
}

std::string SystemConfig::remote_host(const std::string& device_name) const {
  const DeviceConfig* d = find(device_name);
  if (!d || hosts.empty() || d->host == hosts[0].name) return "";
  return d->host;
}

const HostConfig* SystemConfig::find_host(const std::string& host_name) const {
  for (const auto& h : hosts)
    if (h.name == host_name) return &h;
  return nullptr;
}

bool is_host_port(const std::string& address) {
  const auto colon = address.rfind(':');
  return colon != std::string::npos && colon != 0 && colon + 1 != address.size();
}

int SystemConfig::host_index(const std::string& host_name) const {
  for (std::size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].name == host_name) return static_cast<int>(i);
  return 0;
}

std::vector<std::string> SystemConfig::devices_on(const std::string& host_name) const {
  std::vector<std::string> out;
  for (const auto& d : devices)
    if (d.host == host_name) out.push_back(d.name);
  return out;
}

std::string default_config_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("DYPE_CONFIG_DIR"); env && *env) return env;
  if (fs::exists("configs/systems")) return "configs";
#ifdef DYPE_SOURCE_DIR
  return std::string(DYPE_SOURCE_DIR) + "/configs";
#else
  return "configs";
#endif
}

void apply_detected_profile(DeviceConfig& d, const AcceleratorAttributes& attributes, bool keep_link) {
  d.copy_engines = attributes.copy_engines;
  try {
    DeviceProfile p = derive_device_profile(attributes);
    d.kind = p.kind;
    d.power = p.power;
    if (!keep_link) d.link = p.link;
    d.profile = std::move(p);
    d.no_profile_why.clear();
  } catch (const InputError& e) {
    d.no_profile_why = e.what();
    if (!keep_link && attributes.pcie_generation > 0 && attributes.pcie_lanes > 0) {
      d.link.generation = attributes.pcie_generation;
      d.link.lanes = attributes.pcie_lanes;
    }
  }
}

void settle_transfers(SystemConfig& cfg) {
  if (cfg.transfers_stated) return;
  std::string serial_why;
  std::string overlap_why;
  int accelerators = 0;
  for (const DeviceConfig& d : cfg.devices) {
    if (d.kind == DeviceKind::cpu) continue;
    ++accelerators;
    if (d.backend == "emu" || !cfg.remote_host(d.name).empty()) continue;  // remote: an emulated stand-in
    if (d.backend == "xrt") {
      if (serial_why.empty()) serial_why = d.name + " is a real FPGA (XRT copies are not run beside its kernels)";
    } else if (d.copy_engines >= 2) {
      if (overlap_why.empty())
        overlap_why = d.name + " reports " + std::to_string(d.copy_engines) + " copy engines";
    } else if (serial_why.empty()) {
      serial_why = d.copy_engines == 0
                       ? d.name + " reports no copy engine count"
                       : d.name + " reports " + std::to_string(d.copy_engines) + " copy engine (two are needed: one per direction)";
    }
  }
  if (accelerators == 0) {
    cfg.overlap_transfers = false;
    cfg.transfers_why = "the CPU alone has no copies to overlap";
  } else if (!serial_why.empty()) {
    cfg.overlap_transfers = false;
    cfg.transfers_why = serial_why;
  } else {
    cfg.overlap_transfers = true;
    cfg.transfers_why = overlap_why.empty() ? "emulated devices copy on their own engines"
                                            : overlap_why + ": copies run beside kernels, one engine per direction";
  }
}

}  // namespace dype::hw
