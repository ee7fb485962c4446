#include "hw/cpu/cpu_backend.h"

#include "hw/cpu/cpu_device.h"

namespace dype::hw {

Backend cpu_backend() {
  Backend b;
  b.name = "cpu";
  b.create = [](const DeviceConfig& dc, const SystemConfig&) -> DevicePtr {
    DeviceInfo info = detect_cpu_info(dc.name);
    if (dc.model) info.model = dc.model->model + " (host: " + info.model + ")";
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
    return std::vector<DeviceConfig>{d};
  };
  return b;
}

}  // namespace dype::hw
