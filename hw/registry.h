#pragma once
// Backend registry (ggml-backend-reg style): the compiled-in backends, each able to create a
// device from its config entry and to detect the real devices present. The list is explicit
// (registry.cpp), not self-registration, so static linking cannot drop a backend. A new backend
// hw/<name>/ adds one line there behind its DYPE_HAVE_<NAME> flag.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw/detected_profile.h"
#include "hw/device.h"
#include "hw/system_config.h"

namespace dype::hw {

struct Backend {
  std::string name;
  // Creates the device for one config entry (the system config supplies global settings).
  std::function<DevicePtr(const DeviceConfig&, const SystemConfig&)> create;
  // Real devices present on this machine, as config entries (none for emu).
  std::function<std::vector<DeviceConfig>()> detect;
  // What the device of a config entry reports about itself (real accelerators): gives a system
  // file's device without a `model:` the profile detection would. Empty for cpu, emu, xrt.
  std::function<std::optional<AcceleratorAttributes>(const DeviceConfig&)> describe;
};

const std::vector<Backend>& backends();
const Backend* find_backend(std::string_view name);

}  // namespace dype::hw
