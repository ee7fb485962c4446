#pragma once
// CUDA memory: the GPU buffers written once in hw/gpu/gpu_buffer.h, on the CUDA runtime.
#include "hw/cuda/cuda_runtime.h"
#include "hw/gpu/gpu_buffer.h"

namespace dype::hw {

using CudaBuffer = GpuBuffer<CudaRuntime>;
using CudaPinnedHostBuffer = PinnedHostBuffer<CudaRuntime>;

}  // namespace dype::hw
