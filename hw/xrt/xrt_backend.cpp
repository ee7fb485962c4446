#include "hw/xrt/xrt_backend.h"

#include <experimental/xrt_system.h>
#include <spdlog/spdlog.h>

#include "hw/xrt/xrt_device.h"

namespace dype::hw {

std::vector<DeviceConfig> detect_xrt_devices(std::string* why) {
  std::size_t count = 0;
  try {
    count = ::xrt::system::enumerate_devices();
  } catch (const std::exception& e) {
    if (why) *why = std::string("xrt::system::enumerate_devices failed: ") + e.what();
    spdlog::info("no XRT devices: {}", e.what());
    return {};
  }
  if (count == 0 && why) *why = "XRT enumerates 0 devices";
  std::vector<DeviceConfig> out;
  for (std::size_t i = 0; i < count; ++i) {
    DeviceConfig d;
    d.name = "fpga" + std::to_string(i);
    d.backend = "xrt";
    d.kind = DeviceKind::fpga;
    d.ordinal = static_cast<int>(i);
    d.link.type = LinkType::pcie;
    out.push_back(std::move(d));
  }
  return out;
}

Backend xrt_backend() {
  Backend b;
  b.name = "xrt";
  b.create = [](const DeviceConfig& dc, const SystemConfig&) -> DevicePtr {
    DeviceInfo info;
    info.name = dc.name;
    info.kind = DeviceKind::fpga;
    info.backend = "xrt";
    info.product = dc.profile ? dc.profile->product : "Xilinx FPGA";
    info.memory_bytes = dc.profile ? dc.profile->memory_bytes : 0;
    info.power = dc.power;
    auto dev = std::make_unique<XrtDevice>(std::move(info), static_cast<unsigned>(dc.ordinal), dc.p2p);
    if (dc.bitstream) dev->load_bitstream(*dc.bitstream);
    else if (!dc.bitstream_file.empty()) dev->load_bitstream(dc.bitstream_file);
    return dev;
  };
  b.detect = [] { return detect_xrt_devices(); };
  return b;
}

}  // namespace dype::hw
