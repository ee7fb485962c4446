#pragma once
// What each device of a system is planned with, said at start and by the admin API
// (GET /v2/dype/admin/devices, gRPC dype.admin Devices): whether the planner may place kernels on
// it and why not; where its profile came from (a file, a known product, its attributes alone);
// and, per kernel, where its times come from (a fitted store, a start-up measurement, the device
// model). A device that cannot be timed is a warning naming the device and what is missing.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/system.h"
#include "runtime/planning/startup_profile.h"

namespace dype::rt {

struct DevicePlanning {
  std::string device;
  bool planned = false;     // the planner may place kernels on it
  std::string why_not;      // when not planned
  std::string profile;      // "nvidia-h200 (known product)", "amd-mi210 (file configs/devices/amd-mi210.yaml)", "none"
  std::string estimated;    // a detected profile's assumptions
  std::map<std::string, std::string> kernel_times;  // op -> "fitted (...)", "device model (...)", ...
  bool warning = false;     // a device the planner cannot time at all (or only partly)
  std::string summary() const;  // one log line
  nlohmann::json to_json() const;
};

std::vector<DevicePlanning> describe_device_planning(const hw::System& system, const PlanningStores& stores);

}  // namespace dype::rt
