// HIP IPC memory (hw/device_ipc_memory.h): hw/gpu/gpu_ipc_memory.h on the HIP runtime. A client
// on an AMD GPU hipMalloc's a buffer, serialises hipIpcGetMemHandle's 64 bytes and registers them
// through the CUDA shared-memory extension, as ROCm builds of Triton take them.
#include "hw/gpu/gpu_ipc_memory.h"
#include "hw/hip/hip_runtime.h"
#include "kernels/hip/kernels.h"

namespace dype::hw {

HipRuntime::Error HipRuntime::flag_non_finite(const float* x, std::size_t n, unsigned int* flag, Stream s) {
  return kernels::hip::flag_non_finite(x, n, flag, s);
}

std::shared_ptr<DeviceIpcMemory> open_hip_ipc_memory(std::string_view handle, int device_id,
                                                     std::size_t byte_size) {
  return open_gpu_ipc_memory<HipRuntime>(handle, device_id, byte_size);
}

int hip_ipc_device_count() { return gpu_ipc_device_count<HipRuntime>(); }

}  // namespace dype::hw
