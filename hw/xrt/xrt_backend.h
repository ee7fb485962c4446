#pragma once
// The xrt backend: creates XrtDevice from a config entry (devices[i].ordinal picks the board; the
// entry's bitstream manifest is loaded when it names an xclbin) and detects the boards XRT sees.
// Without XRT's runtime (XILINX_XRT unset, no shim, no board), detection returns nothing and logs
// why.
#include <string>
#include <vector>

#include "hw/backend.h"

namespace dype::hw {

Backend xrt_backend();
std::vector<DeviceConfig> detect_xrt_devices(std::string* why = nullptr);

}  // namespace dype::hw
