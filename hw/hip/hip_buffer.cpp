#include "hw/hip/hip_buffer.h"

#include <hip/hip_runtime_api.h>

#include "hw/hip/hip_device.h"

namespace dype::hw {

namespace {
std::atomic<std::uint64_t> next_buffer_id{1};
}

HipBuffer::HipBuffer(HipDevice& device, std::size_t bytes)
    : Buffer(device, bytes), ordinal_(device.ordinal()), id_(next_buffer_id.fetch_add(1)) {
  device.reserve_memory(bytes);
  if (bytes == 0) return;
  try {
    hip_check(device.name(), "hipSetDevice", hipSetDevice(ordinal_));
    const hipError_t rc = hipMalloc(&ptr_, bytes);
    if (rc != hipSuccess) {
      (void)hipGetLastError();  // allocation failures are not sticky: clear for later calls
      hip_check(device.name(), "hipMalloc(" + std::to_string(bytes) + " bytes)", rc);
    }
  } catch (...) {
    device.release_memory(bytes);  // the destructor does not run for a failed constructor
    throw;
  }
}

HipBuffer::~HipBuffer() {
  if (ptr_) {
    // No throwing from a destructor: a failing free during teardown is ignored.
    (void)hipSetDevice(ordinal_);
    (void)hipFree(ptr_);
  }
  device().release_memory(size_bytes());
}

HipPinnedHostBuffer::HipPinnedHostBuffer(std::size_t bytes) : bytes_(bytes) {
  void* p = nullptr;
  const hipError_t rc = hipHostMalloc(&p, bytes, hipHostMallocDefault);
  if (rc != hipSuccess) hip_check("pinned host", "hipHostMalloc(" + std::to_string(bytes) + " bytes)", rc);
  ptr_ = static_cast<std::byte*>(p);
}

HipPinnedHostBuffer::~HipPinnedHostBuffer() {
  if (ptr_) (void)hipHostFree(ptr_);
}

}  // namespace dype::hw
