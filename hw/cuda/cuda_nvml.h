#pragma once
// NVML, loaded at run time with dlopen (libnvidia-ml.so.1 ships with the driver, not the toolkit):
// a machine without the NVIDIA driver still runs, and energy() simply reports nothing.
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace dype::hw {

class Nvml {
 public:
  // Loads and initialises NVML; nullptr with `why` filled when unavailable.
  static std::shared_ptr<Nvml> load(std::string* why, const char* library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // GPUs are named by PCI bus id ("0000:3b:00.0", cudaDeviceGetPCIBusId): CUDA orders devices
  // fastest first by default, NVML by PCI address, so ordinals do not match.
  // Energy since the driver was loaded (nvmlDeviceGetTotalEnergyConsumption, Volta and later),
  // joules; nullopt when the GPU does not report it.
  std::optional<double> total_energy_j(const std::string& pci_bus_id) const;
  // Instantaneous board power (nvmlDeviceGetPowerUsage), watts.
  std::optional<double> power_w(const std::string& pci_bus_id) const;
  // The board power limit the driver enforces (nvmlDeviceGetEnforcedPowerLimit), watts: a detected
  // GPU's busy power when its product is not in the known-products table.
  std::optional<double> power_limit_w(const std::string& pci_bus_id) const;
  // PCIe link generation and width currently negotiated, for detected configs.
  std::optional<std::pair<int, int>> pcie_link(const std::string& pci_bus_id) const;

 private:
  Nvml() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
};

}  // namespace dype::hw
