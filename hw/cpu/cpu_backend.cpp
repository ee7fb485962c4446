#include "hw/cpu/cpu_backend.h"

#include <filesystem>
#include <string>

#include "hw/cpu/cpu_device.h"
#include "hw/device_profile.h"
#include "hw/system_config.h"

namespace dype::hw {

Backend cpu_backend() {
  Backend b;
  b.name = "cpu";
  b.create = [](const DeviceConfig& dc, const SystemConfig&) -> DevicePtr {
    DeviceInfo info = detect_cpu_info(dc.name);
    if (dc.profile) info.product = dc.profile->product + " (host: " + info.product + ")";
    info.power = dc.power;
    return std::make_unique<CpuDevice>(std::move(info), dc.threads);
  };
  b.detect = [] {
    DeviceConfig d;
    d.name = "cpu0";
    d.backend = "cpu";
    d.kind = DeviceKind::cpu;
    d.link.type = LinkType::host;
    d.schedulable = true;  // alone, the CPU is the only place work can go
    // The generic CPU profile gives the planner kernel times and power until a profile of this
    // host is fitted (dype-profile); without one no kernel could be planned on the CPU.
    const std::string profile = default_config_dir() + "/devices/generic-cpu.yaml";
    if (std::filesystem::exists(profile)) {
      d.profile_file = profile;
      d.profile = load_device_profile(profile);
      d.power = d.profile->power;
      d.link.host_bandwidth_bytes_per_s = d.profile->memory_bandwidth_bytes_per_s;
    }
    return std::vector<DeviceConfig>{d};
  };
  return b;
}

}  // namespace dype::hw
