#pragma once
// Buffer: a block of device memory, owned (RAII). Freed when the owning BufferPtr goes away; the
// device that allocated it must outlive it.
#include <cstddef>
#include <memory>
#include <span>

namespace dype::hw {

class Device;

// data: real storage. size_only: capacity is accounted but no storage exists (timing-only runs of
// paper-scale shapes, where arithmetic is skipped).
enum class AllocMode { data, size_only };

class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::size_t size_bytes() const { return size_bytes_; }
  Device& device() const { return *device_; }
  // Host-addressable view of the contents, empty when the buffer holds no data (size-only) or its
  // memory is not host-visible (a real GPU). Backends whose memory is host memory (cpu, emu)
  // return the storage.
  virtual std::span<std::byte> host_span() { return {}; }
  virtual std::span<const std::byte> host_span() const { return {}; }
  // Whether the contents are host-visible storage here (cpu, emu data buffers). False for size-only
  // buffers and also for every real GPU's: those hold data all the same, written by copies. Not
  // the test for "should I write this buffer" (the profiler once skipped every GPU input on it).
  bool has_data() const { return !host_span().empty() || size_bytes_ == 0; }
  // The buffer's address in its GPU's memory (what an IPC handle is made from); null for memory
  // that is not a GPU's.
  virtual const void* gpu_address() const { return nullptr; }

  // Virtual-clock time at which the last write to this buffer completes: an operation reading it
  // cannot start earlier (dependency tracking for emulated devices). Measured backends leave 0.
  double ready_at_s() const { return ready_at_s_; }
  void set_ready_at_s(double t) { ready_at_s_ = t; }

  template <typename T>
  std::span<T> as() {
    auto s = host_span();
    return {reinterpret_cast<T*>(s.data()), s.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> as() const {
    auto s = host_span();
    return {reinterpret_cast<const T*>(s.data()), s.size() / sizeof(T)};
  }

 protected:
  Buffer(Device& device, std::size_t size_bytes) : device_(&device), size_bytes_(size_bytes) {}

 private:
  Device* device_;
  std::size_t size_bytes_;
  double ready_at_s_ = 0.0;
};

using BufferPtr = std::unique_ptr<Buffer>;

}  // namespace dype::hw
