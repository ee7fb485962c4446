#include "hw/cuda/cuda_buffer.h"

#include <cuda_runtime_api.h>

#include "hw/cuda/cuda_device.h"

namespace dype::hw {

namespace {
std::atomic<std::uint64_t> next_buffer_id{1};
}

CudaBuffer::CudaBuffer(CudaDevice& device, std::size_t bytes)
    : Buffer(device, bytes), ordinal_(device.ordinal()), id_(next_buffer_id.fetch_add(1)) {
  device.reserve_memory(bytes);
  if (bytes == 0) return;
  cuda_check(device.name(), "cudaSetDevice", cudaSetDevice(ordinal_));
  const cudaError_t rc = cudaMalloc(&ptr_, bytes);
  if (rc != cudaSuccess) {
    device.release_memory(bytes);
    (void)cudaGetLastError();  // allocation failures are not sticky: clear for later calls
    cuda_check(device.name(), "cudaMalloc(" + std::to_string(bytes) + " bytes)", rc);
  }
}

CudaBuffer::~CudaBuffer() {
  if (ptr_) {
    // No throwing from a destructor: a failing free during teardown is ignored.
    cudaSetDevice(ordinal_);
    cudaFree(ptr_);
  }
  device().release_memory(size_bytes());
}

PinnedHostBuffer::PinnedHostBuffer(std::size_t bytes) : bytes_(bytes) {
  void* p = nullptr;
  const cudaError_t rc = cudaMallocHost(&p, bytes);
  if (rc != cudaSuccess) cuda_check("pinned host", "cudaMallocHost(" + std::to_string(bytes) + " bytes)", rc);
  ptr_ = static_cast<std::byte*>(p);
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

}  // namespace dype::hw
