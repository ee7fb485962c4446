#pragma once
// What a backend is (hw/<name>/<name>_backend.h each make one): it creates a device from its
// config entry, detects the real devices present, and describes a real device's attributes.
// registry.h lists every one dype knows and which of them this build has.
#include <functional>
#include <optional>
#include <string>
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

}  // namespace dype::hw
