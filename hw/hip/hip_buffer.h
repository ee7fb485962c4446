#pragma once
// HIP memory: the GPU buffers written once in hw/gpu/gpu_buffer.h, on the HIP runtime.
#include "hw/gpu/gpu_buffer.h"
#include "hw/hip/hip_runtime.h"

namespace dype::hw {

using HipBuffer = GpuBuffer<HipRuntime>;
using HipPinnedHostBuffer = PinnedHostBuffer<HipRuntime>;

}  // namespace dype::hw
