#pragma once
// Host buffers that large request payloads are received into (a gRPC raw_input_contents entry, an
// HTTP body), reused from one request to the next and, in a process where a GPU backend made a
// device, pinned once when first allocated (hw::pin_host_memory). A GPU stage then uploads x from
// where it was received by one DMA (GpuDevice::do_copy_from_host asks hw::host_memory_pinned)
// instead of copying it through its staging slots first, so the only host copy between the socket
// and the device is the receive itself. Pinning is slow (cudaHostRegister of tens of MB takes
// milliseconds), so a buffer is pinned once and kept, never pinned per request. Free buffers are
// kept up to `keep_bytes`, the least recently returned given up first (unpinned and freed).
//
//   rt::HostBufferPool& pool = rt::receive_buffers();  // the process's pool
//   std::shared_ptr<std::byte> b = pool.acquire(n);     // >= n bytes, 64-byte aligned
//   ... receive into b.get(), hand b to whoever reads it ...
//   b.reset();                                          // the last holder lets go: back in the pool
//
// Blocks under `min_bytes` are plain heap blocks (the C heap's caches serve them well, and pinning
// a small block costs more than its staging copy). A buffer outliving its pool is simply freed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dype::rt {

struct HostBufferPoolOptions {
  std::size_t min_bytes = std::size_t{1} << 20;    // smaller: a plain heap block, neither kept nor pinned
  std::size_t keep_bytes = std::size_t{512} << 20;  // free buffers kept at most (0: none kept)
  bool pin = true;                                  // pin pooled buffers when a GPU backend can
};

struct HostBufferPoolStats {
  std::uint64_t allocated = 0;   // pooled buffers allocated
  std::uint64_t reused = 0;      // acquisitions served by a kept buffer
  std::uint64_t pinned = 0;      // buffers pinned when allocated
  std::uint64_t pin_failed = 0;  // buffers a GPU backend could not pin (they work, unpinned)
  std::size_t free_bytes = 0;    // kept, free
  std::size_t pinned_bytes = 0;  // pinned now, free or in use
  std::string last_pin_error;    // why the last pin failed ("" if none did)
};

class HostBufferPool {
 public:
  explicit HostBufferPool(HostBufferPoolOptions options = {});
  ~HostBufferPool();
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;

  // At least n bytes (n > 0), 64-byte aligned (page aligned when pooled); when the last copy of the
  // pointer goes, the buffer returns to the pool. `capacity`, if given, gets the usable size.
  std::shared_ptr<std::byte> acquire(std::size_t n, std::size_t* capacity = nullptr);
  // The capacity a pooled buffer for n bytes gets: n rounded up to an eighth of its power of two
  // (at most 12.5% more), so requests of nearly the same size share buffers.
  static std::size_t pooled_capacity(std::size_t n);

  // Free buffers kept at most from now on (fewer are freed at once when above it).
  void set_keep_bytes(std::size_t keep_bytes);
  // Frees every free buffer (after a model is unloaded, or to give pinned memory back).
  void trim();
  HostBufferPoolStats stats() const;
  HostBufferPoolOptions options() const;

  struct State;  // shared with the buffers handed out, so they can come back after the pool is gone

 private:
  std::shared_ptr<State> state_;
};

// The process's pool for received payloads (the gRPC and HTTP front ends), made at first use.
HostBufferPool& receive_buffers();

}  // namespace dype::rt
