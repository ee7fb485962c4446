#pragma once
// Host memory page-locked for the GPUs' DMA engines (cudaHostRegister / hipHostRegister). A
// registered system shared-memory region is pinned once, when it is registered: copies between it
// and a GPU then run at link speed straight from (or into) the region, without the pinned staging
// copy every other host copy takes (GpuDevice::do_copy_from_host / do_copy_to_host ask
// host_memory_pinned first).
//
//   auto pin = hw::pin_host_memory(region.data(), region.size(), &why);  // null: nothing pinned
//   ... gpu.copy_from_host(buffer, bytes inside the region) ...         // one DMA, no staging
//   pin.reset();                                                        // unpinned
//
// Each GPU backend adds its pinner when it makes its first device, so a process without GPUs pins
// nothing.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dype::hw {

struct HostPinner {
  std::string backend;  // "cuda", "hip": one pinner per backend
  // Pins [data, data + bytes) for every device of the backend; false with `error` set if it cannot.
  std::function<bool(void* data, std::size_t bytes, std::string& error)> pin;
  std::function<void(void* data)> unpin;
};

// Adds a backend's pinner (a second one for the same backend is ignored).
void add_host_pinner(HostPinner pinner);

// Host memory pinned by every backend that could pin it; unpinned when destroyed.
class PinnedHostMemory {
 public:
  ~PinnedHostMemory();
  PinnedHostMemory(const PinnedHostMemory&) = delete;
  PinnedHostMemory& operator=(const PinnedHostMemory&) = delete;
  const std::string& backends() const { return backends_; }  // "cuda", "cuda,hip"

 private:
  friend std::unique_ptr<PinnedHostMemory> pin_host_memory(void*, std::size_t, std::string*);
  explicit PinnedHostMemory(void* data) : data_(data) {}
  void* data_;
  std::string backends_;
  std::vector<std::function<void(void*)>> unpins_;
};

// Pins [data, data + bytes) with every pinner added; null when there is none or none could (then
// `why_not`, if given, says why: no GPU backend with a device, or each backend's error).
std::unique_ptr<PinnedHostMemory> pin_host_memory(void* data, std::size_t bytes,
                                                  std::string* why_not = nullptr);

// Whether a GPU backend has added its pinner (a process without GPUs pins nothing).
bool can_pin_host_memory();

// Whether [p, p + bytes) lies wholly inside memory that is pinned now.
bool host_memory_pinned(const void* p, std::size_t bytes);

}  // namespace dype::hw
