#pragma once
// CpuDevice: the host CPU as a device. Real: buffers in host memory, kernels from kernels/cpu run in
// a oneTBB arena limited to `threads`, Events carry measured wall-clock times (hw::now_s()).
#include <memory>
#include <string>

#include "hw/device.h"

namespace dype::hw {

class CpuDevice final : public Device {
 public:
  // threads <= 0: all hardware threads.
  explicit CpuDevice(DeviceInfo info, int threads = 0);
  ~CpuDevice() override;

  int threads() const { return threads_; }
  bool supports(kernels::OpKind) const override { return true; }
  BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) override;
  // The kernels read host memory: `bytes` is used in place (BorrowedHostBuffer).
  BufferPtr borrow_host(std::span<const std::byte> bytes,
                        std::shared_ptr<const void> keep) override;

 protected:
  Event do_launch(const KernelLaunch& launch, std::span<const Event> after, int queue) override;
  Event do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                          std::span<const Event> after) override;
  Event do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                        std::span<const Event> after) override;

 private:
  int threads_;
  struct Arena;  // a tbb::task_arena, kept out of this header
  std::unique_ptr<Arena> arena_;
};

// Description of this machine's CPU (model name from /proc/cpuinfo, memory from /proc/meminfo).
DeviceInfo detect_cpu_info(const std::string& name = "cpu0");

}  // namespace dype::hw
