#include "hw/cpu/cpu_buffer.h"

#include <cstdlib>
#include <new>

#include "hw/device.h"

namespace dype::hw {

void HostBuffer::Free::operator()(std::byte* p) const { std::free(p); }

HostBuffer::HostBuffer(Device& device, std::size_t bytes, AllocMode mode) : Buffer(device, bytes) {
  if (mode == AllocMode::data && bytes > 0) {
    // 64-byte alignment: one cache line, and what AVX-512 loads prefer.
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (!p) throw DeviceError(device.name(), "host allocation of " + std::to_string(bytes) + " bytes failed");
    data_.reset(p);
  }
  device.reserve_memory(bytes);
}

HostBuffer::~HostBuffer() { device().release_memory(size_bytes()); }

BorrowedHostBuffer::BorrowedHostBuffer(Device& device, std::span<const std::byte> bytes,
                                       std::shared_ptr<const void> keep)
    : Buffer(device, bytes.size()), bytes_(bytes), keep_(std::move(keep)) {}

std::span<std::byte> BorrowedHostBuffer::host_span() {
  throw InputError(
      device().name(),
      "a borrowed input buffer (memory the request owns) is read-only: refusing to write into it");
}

}  // namespace dype::hw
