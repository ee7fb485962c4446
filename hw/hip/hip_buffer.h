#pragma once
// HIP memory, RAII: HipBuffer (hipMalloc'd device memory, freed on destruction) and
// HipPinnedHostBuffer (hipHostMalloc'd page-locked staging memory, which the DMA engines read
// directly, so host<->device copies run at link speed and overlap with host-side memcpy).
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "hw/buffer.h"

namespace dype::hw {

class HipDevice;

class HipBuffer final : public Buffer {
 public:
  // Device memory on `device`'s GPU. size_only buffers are still allocated: on a real GPU a
  // timing-only run still needs the memory its kernels touch.
  HipBuffer(HipDevice& device, std::size_t bytes);
  ~HipBuffer() override;

  void* device_ptr() const { return ptr_; }
  template <typename T>
  T* ptr() const { return static_cast<T*>(ptr_); }

  // Identity and write generation: the SpMM plan cache keys on (id, generation) rather than on
  // pointers, which hipMalloc reuses after a free.
  std::uint64_t id() const { return id_; }
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  void mark_written() { generation_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  int ordinal_;
  void* ptr_ = nullptr;
  std::uint64_t id_;
  std::atomic<std::uint64_t> generation_{0};
};

class HipPinnedHostBuffer {
 public:
  explicit HipPinnedHostBuffer(std::size_t bytes);
  ~HipPinnedHostBuffer();
  HipPinnedHostBuffer(const HipPinnedHostBuffer&) = delete;
  HipPinnedHostBuffer& operator=(const HipPinnedHostBuffer&) = delete;
  std::byte* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  std::byte* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace dype::hw
