#pragma once
// GPU memory another process shared by an IPC handle (Triton's CUDA shared-memory extension: the
// client cudaMalloc's a buffer, serialises cudaIpcGetMemHandle's handle, and the server opens it;
// on AMD GPUs the same with hipMalloc and hipIpcGetMemHandle, as ROCm builds of Triton take it).
// The daemon reads a request's inputs out of it and writes its outputs into it.
//
//   auto m = open_device_ipc_memory(handle_bytes, /*device_id=*/0, byte_size);  // InputError if
//   m->read(offset, host_dst, n);   m->write(offset, host_src, n);               // it cannot
//   gpu.copy_from_ipc_memory(buffer, *m, offset, n);   // in place on that very GPU (hw/device.h)
#include <cstddef>
#include <memory>
#include <string>
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

// The size of a serialised cudaIpcMemHandle_t or hipIpcMemHandle_t.
inline constexpr std::size_t kGpuIpcHandleBytes = 64;

// Opens a serialised IPC handle on device `device_id` with the GPU runtime this host's devices
// answer to: CUDA where CUDA sees a device, else HIP where HIP does (a build with both picks the
// one that has devices; with none, the first built says device_id is not one of its devices).
// InputError naming raw_handle or device_id when they cannot be used; Error when this build has
// neither runtime.
std::shared_ptr<DeviceIpcMemory> open_device_ipc_memory(std::string_view handle, int device_id,
                                                        std::size_t byte_size);
// Whether open_device_ipc_memory can work in this build (CUDA or HIP compiled in).
bool gpu_ipc_built();
// The runtime open_device_ipc_memory uses here: "cuda", "hip", or "" when neither is built.
std::string_view gpu_ipc_backend();

// Each runtime on its own (defined by hw/cuda and hw/hip; without the runtime, open_* throws Error
// and *_device_count is -1).
std::shared_ptr<DeviceIpcMemory> open_cuda_ipc_memory(std::string_view handle, int device_id,
                                                      std::size_t byte_size);
std::shared_ptr<DeviceIpcMemory> open_hip_ipc_memory(std::string_view handle, int device_id,
                                                     std::size_t byte_size);
int cuda_ipc_device_count();
int hip_ipc_device_count();

}  // namespace dype::hw
