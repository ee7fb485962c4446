#pragma once
// ROCm SMI, loaded at run time with dlopen (librocm_smi64.so.1 needs the amdgpu driver's sysfs
// files to do anything): a machine without it still runs, and energy() simply reports nothing.
// The few entry points used are declared in hip_smi.cpp, so no rocm_smi.h is needed to build.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dype::hw {

class RocmSmi {
 public:
  // Loads and initialises ROCm SMI; nullptr with `why` filled when unavailable (library missing,
  // rsmi_init failing, no GPU it can monitor).
  static std::shared_ptr<RocmSmi> load(std::string* why, const char* library = "librocm_smi64.so.1");
  ~RocmSmi();
  RocmSmi(const RocmSmi&) = delete;
  RocmSmi& operator=(const RocmSmi&) = delete;

  // GPUs are named by PCI bus id ("0000:c3:00.0", hipDeviceGetPCIBusId): HIP's ordinals follow
  // HIP_VISIBLE_DEVICES and the runtime's order, SMI's indices its own sysfs enumeration.
  // Accumulated energy (rsmi_dev_energy_count_get, CDNA2 and later), joules; nullopt when the GPU
  // or driver does not report it.
  std::optional<double> total_energy_j(const std::string& pci_bus_id) const;
  // Average board power (rsmi_dev_power_ave_get, sensor 0), watts.
  std::optional<double> power_w(const std::string& pci_bus_id) const;
  // Number of GPUs ROCm SMI monitors.
  std::uint32_t devices() const { return devices_; }

 private:
  RocmSmi() = default;
  std::optional<std::uint32_t> index_of(const std::string& pci_bus_id) const;
  struct Api;
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
  std::uint32_t devices_ = 0;
};

}  // namespace dype::hw
