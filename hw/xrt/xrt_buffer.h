#pragma once
// XrtBuffer: FPGA device memory as an xrt::bo (RAII), normal or flags::p2p (exposed on the PCIe
// BAR, so a GPU or NVMe device can DMA into it directly). The bo can be released and recreated
// around a bitstream swap: its contents are parked in host memory meanwhile.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>

#include "hw/buffer.h"

namespace dype::hw {

class XrtDevice;

class XrtBuffer final : public Buffer {
 public:
  XrtBuffer(XrtDevice& device, std::size_t bytes, bool p2p, ::xrt::memory_group group);
  ~XrtBuffer() override;

  ::xrt::bo& bo() { return bo_; }
  const ::xrt::bo& bo() const { return bo_; }
  bool p2p() const { return p2p_; }

  // Bitstream swap: copy the contents to host and drop the bo / allocate a fresh bo (in the new
  // image's memory group) and restore the contents.
  void park();
  void restore(::xrt::device& dev, ::xrt::memory_group group);

 private:
  bool p2p_;
  ::xrt::bo bo_;
  std::vector<std::byte> parked_;
};

}  // namespace dype::hw
