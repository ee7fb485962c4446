#include "hw/xrt/xrt_buffer.h"

#include <algorithm>

#include "hw/xrt/xrt_device.h"

namespace dype::hw {

namespace {
// Buffer objects in whole 4 KiB pages. Never empty: XRT rejects zero-sized bos, and an empty
// Buffer keeps one page so it stays bindable. Whole pages: XRT backs host-side bos with
// aligned_alloc(4096, size), which C11 only defines for sizes that are a multiple of the alignment
// (AddressSanitizer refuses the rest); the device allocates whole pages anyway. Transfers still
// move only the requested bytes.
constexpr std::size_t kBoPage = 4096;
std::size_t bo_bytes(std::size_t bytes) { return std::max<std::size_t>(1, (bytes + kBoPage - 1) / kBoPage) * kBoPage; }
}  // namespace

XrtBuffer::XrtBuffer(XrtDevice& device, std::size_t bytes, bool p2p, ::xrt::memory_group group)
    : Buffer(device, bytes), p2p_(p2p) {
  device.reserve_memory(bytes);
  try {
    bo_ = ::xrt::bo(device.native(), bo_bytes(bytes),
                    p2p ? ::xrt::bo::flags::p2p : ::xrt::bo::flags::normal, group);
  } catch (const std::exception& e) {
    device.release_memory(bytes);
    throw DeviceError(device.name(), std::string("xrt::bo(") + std::to_string(bytes) +
                                         (p2p ? " bytes, p2p" : " bytes") + ") failed: " + e.what());
  }
  device.track(this);
}

XrtBuffer::~XrtBuffer() {
  static_cast<XrtDevice&>(device()).untrack(this);
  bo_ = ::xrt::bo();
  device().release_memory(size_bytes());
}

void XrtBuffer::park() {
  if (!bo_) return;
  parked_.resize(size_bytes());
  if (!parked_.empty()) {
    bo_.sync(XCL_BO_SYNC_BO_FROM_DEVICE, size_bytes(), 0);
    bo_.read(parked_.data(), size_bytes(), 0);
  }
  bo_ = ::xrt::bo();
}

void XrtBuffer::restore(::xrt::device& dev, ::xrt::memory_group group) {
  bo_ = ::xrt::bo(dev, bo_bytes(size_bytes()), p2p_ ? ::xrt::bo::flags::p2p : ::xrt::bo::flags::normal, group);
  if (!parked_.empty()) {
    bo_.write(parked_.data(), parked_.size(), 0);
    bo_.sync(XCL_BO_SYNC_BO_TO_DEVICE, parked_.size(), 0);
  }
  parked_.clear();
  parked_.shrink_to_fit();
}

}  // namespace dype::hw
