#pragma once
// System: the devices of one box and their topology, built from a SystemConfig (a system file
// read by system_file.h, or detect_system_config()).
//
//   auto sys = hw::System::from_config(hw::load_system_config("configs/systems/paper-testbed-pcie4.yaml"));
//   for (hw::Device* d : sys.devices()) std::puts(d->name().c_str());
//   hw::TransferEstimate x = sys.topology().estimate(sys.indices({"fpga0", "fpga1"}),
//                                                    sys.indices({"gpu0"}), bytes);
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hw/device.h"
#include "hw/registry.h"
#include "hw/system_config.h"
#include "hw/system_file.h"
#include "hw/topology.h"

namespace dype::hw {

class System {
 public:
  static System from_config(const SystemConfig& config);
  static System detect() { return from_config(detect_system_config()); }

  System(System&&) = default;
  System& operator=(System&&) = default;
  ~System();

  const SystemConfig& config() const { return config_; }
  const Topology& topology() const { return *topology_; }
  std::span<Device* const> devices() const { return views_; }
  std::vector<Device*> devices_of(DeviceKind kind) const;
  Device& device(std::string_view name) const;  // throws InputError when absent
  Device* find(std::string_view name) const;
  // Topology indices of named devices (for Topology::estimate).
  std::vector<int> indices(std::initializer_list<std::string_view> names) const;
  std::vector<int> indices(std::span<Device* const> devices) const;

 private:
  System() = default;
  SystemConfig config_;
  std::unique_ptr<Topology> topology_;  // heap-held: devices point at it, System stays movable
  std::vector<DevicePtr> devices_;
  std::vector<Device*> views_;
};

}  // namespace dype::hw
