#pragma once
// The hip backend: creates HipDevice from a config entry (devices[i].ordinal picks the GPU) and
// detects the AMD GPUs present. Without a driver or GPU, detection returns nothing and logs why.
#include <string>
#include <vector>

#include "hw/backend.h"

namespace dype::hw {

Backend hip_backend();

// The GPUs HIP reports, as config entries gpu<i> (backend hip); empty with `why` set when
// hipGetDeviceCount fails (no amdgpu driver / ROCk, no device) or reports none.
std::vector<DeviceConfig> detect_hip_devices(std::string* why = nullptr);

// What HIP reports about a GPU (hipDeviceGetAttribute, hipGetDeviceProperties).
AcceleratorAttributes hip_attributes(int ordinal);

}  // namespace dype::hw
