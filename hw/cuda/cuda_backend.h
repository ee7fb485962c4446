#pragma once
// The cuda backend: creates CudaDevice from a config entry (devices[i].ordinal picks the GPU) and
// detects the GPUs present. Without a driver or GPU, detection returns nothing and logs why.
#include <string>
#include <vector>

#include "hw/detected_profile.h"
#include "hw/backend.h"

namespace dype::hw {

Backend cuda_backend();

// The GPUs CUDA reports, as config entries gpu<i>; empty with `why` set when cudaGetDeviceCount
// fails (no driver, no device, driver too old for this runtime).
std::vector<DeviceConfig> detect_cuda_devices(std::string* why = nullptr);

class Nvml;
// What CUDA (cudaDeviceGetAttribute) and NVML (link, power limit; may be null) report about a GPU.
AcceleratorAttributes cuda_attributes(int ordinal, const Nvml* nvml);

}  // namespace dype::hw
