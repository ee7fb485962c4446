#pragma once
// GPU memory another process shared by an IPC handle (Triton's CUDA shared-memory extension: the
// client cudaMalloc's a buffer, serialises cudaIpcGetMemHandle's handle, and the server opens it).
// The daemon reads a request's inputs out of it and writes its outputs into it.
//
//   auto m = open_cuda_ipc_memory(handle_bytes, /*device_id=*/0, byte_size);   // Error if it
//   cannot m->read(offset, host_dst, n);   m->write(offset, host_src, n);
//   gpu.copy_from_ipc_memory(buffer, *m, offset, n);   // in place on that very GPU (hw/device.h)
#include <cstddef>
#include <memory>
#include <string_view>

namespace dype::hw {

class DeviceIpcMemory {
 public:
  virtual ~DeviceIpcMemory() = default;
  virtual std::size_t size() const = 0;
  virtual int device_id() const = 0;
  // The backend whose devices can use it in place ("cuda"), and its address there (the opened
  // allocation's start): what GpuDevice::copy_from_ipc_memory copies from.
  virtual std::string_view backend() const = 0;
  virtual const void* device_ptr() const = 0;
  // Whether the `count` floats at `offset` are all finite, checked on the device (a request's
  // features that never pass through the host are still refused when they hold NaN or Inf).
  virtual bool all_finite_f32(std::size_t offset, std::size_t count) const = 0;
  // Device -> host and host -> device copies of n bytes at `offset` (checked against size()).
  virtual void read(std::size_t offset, void* dst, std::size_t n) const = 0;
  virtual void write(std::size_t offset, const void* src, std::size_t n) const = 0;
};

// The size of a serialised cudaIpcMemHandle_t.
inline constexpr std::size_t kCudaIpcHandleBytes = 64;

// Opens a serialised cudaIpcMemHandle_t (kCudaIpcHandleBytes bytes) on device `device_id`.
// InputError naming raw_handle or device_id when they cannot be used; NotSupported-style Error
// when this build has no CUDA.
std::shared_ptr<DeviceIpcMemory> open_cuda_ipc_memory(std::string_view handle, int device_id,
                                                      std::size_t byte_size);

// Whether open_cuda_ipc_memory can work in this build (CUDA compiled in).
bool cuda_ipc_built();

}  // namespace dype::hw
