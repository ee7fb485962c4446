// CUDA IPC memory (hw/device_ipc_memory.h): hw/gpu/gpu_ipc_memory.h on the CUDA runtime.
#include "hw/cuda/cuda_runtime.h"
#include "hw/gpu/gpu_ipc_memory.h"
#include "kernels/cuda/kernels.h"

namespace dype::hw {

CudaRuntime::Error CudaRuntime::flag_non_finite(const float* x, std::size_t n, unsigned int* flag, Stream s) {
  return kernels::cuda::flag_non_finite(x, n, flag, s);
}

std::shared_ptr<DeviceIpcMemory> open_cuda_ipc_memory(std::string_view handle, int device_id,
                                                      std::size_t byte_size) {
  return open_gpu_ipc_memory<CudaRuntime>(handle, device_id, byte_size);
}

int cuda_ipc_device_count() { return gpu_ipc_device_count<CudaRuntime>(); }

}  // namespace dype::hw
