#pragma once
// GPU memory, RAII, written once for every GPU vendor (CUDA, HIP) against a runtime traits struct
// (hw/gpu/gpu_device.h says what one provides): GpuBuffer<Api> is device memory freed on
// destruction; PinnedHostBuffer<Api> is page-locked staging memory, which the DMA engines read
// directly, so host<->device copies run at link speed and overlap with host-side memcpy.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hw/buffer.h"
#include "hw/device.h"

namespace dype::hw {

template <class Api>
class GpuDevice;

namespace gpu_detail {
inline std::atomic<std::uint64_t> next_buffer_id{1};
}  // namespace gpu_detail

template <class Api>
class GpuBuffer final : public Buffer {
 public:
  // Device memory on `device`'s GPU. size_only buffers are still allocated: on a real GPU a
  // timing-only run still needs the memory its kernels touch.
  GpuBuffer(GpuDevice<Api>& device, std::size_t bytes)
      : Buffer(device, bytes), ordinal_(device.ordinal()), id_(gpu_detail::next_buffer_id.fetch_add(1)) {
    device.reserve_memory(bytes);
    if (bytes == 0) return;
    try {
      Api::check(device.name(), Api::kSetDevice, Api::set_device(ordinal_));
      const typename Api::Error rc = Api::malloc(&ptr_, bytes);
      if (rc != Api::kSuccess) {
        (void)Api::get_last_error();  // allocation failures are not sticky: clear for later calls
        Api::check(device.name(), std::string(Api::kMalloc) + "(" + std::to_string(bytes) + " bytes)", rc);
      }
    } catch (...) {
      device.release_memory(bytes);  // the destructor does not run for a failed constructor
      throw;
    }
  }
  ~GpuBuffer() override {
    if (ptr_) {
      // No throwing from a destructor: a failing free during teardown is ignored.
      (void)Api::set_device(ordinal_);
      (void)Api::free(ptr_);
    }
    device().release_memory(size_bytes());
  }

  void* device_ptr() const { return ptr_; }
  const void* gpu_address() const override { return ptr_; }
  template <typename T>
  T* ptr() const { return static_cast<T*>(ptr_); }

  // Identity and write generation: the SpMM plan cache keys on (id, generation) rather than on
  // pointers, which the allocator reuses after a free.
  std::uint64_t id() const { return id_; }
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  void mark_written() { generation_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  int ordinal_;
  void* ptr_ = nullptr;
  std::uint64_t id_;
  std::atomic<std::uint64_t> generation_{0};
};

template <class Api>
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(std::size_t bytes) : bytes_(bytes) {
    void* p = nullptr;
    const typename Api::Error rc = Api::malloc_host(&p, bytes);
    if (rc != Api::kSuccess)
      Api::check("pinned host", std::string(Api::kMallocHost) + "(" + std::to_string(bytes) + " bytes)", rc);
    ptr_ = static_cast<std::byte*>(p);
  }
  ~PinnedHostBuffer() {
    if (ptr_) (void)Api::free_host(ptr_);
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  std::byte* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  std::byte* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace dype::hw
