#pragma once
// GPU memory another process shared by an IPC handle (hw/device_ipc_memory.h), for either GPU
// runtime: GpuIpcMemory<CudaRuntime> opens a cudaIpcMemHandle_t, GpuIpcMemory<HipRuntime> a
// hipIpcMemHandle_t (hw/cuda/cuda_runtime.h, hw/hip/hip_runtime.h map the calls). One source, as
// GpuDevice<Api> is, so the two cannot drift apart.
//
//   auto m = open_gpu_ipc_memory<CudaRuntime>(handle_bytes, /*device_id=*/0, byte_size);
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/error.h"
#include "hw/device_ipc_memory.h"

namespace dype::hw {

template <class Api>
class GpuIpcMemory final : public DeviceIpcMemory {
 public:
  GpuIpcMemory(const typename Api::IpcHandle& handle, int device_id, std::size_t byte_size)
      : device_id_(device_id), size_(byte_size) {
    int count = 0;
    if (Api::device_count(&count) != Api::kSuccess) {
      (void)Api::get_last_error();  // no driver or no device: reported here as none found
      count = 0;
    }
    if (device_id < 0 || device_id >= count)
      throw InputError("device_id", std::to_string(device_id) + " is not a " + vendor() +
                                        " device of this host (" + std::to_string(count) + " found)");
    Api::check(name(), Api::kSetDevice, Api::set_device(device_id));
    const auto rc = Api::ipc_open(&ptr_, handle);
    if (rc != Api::kSuccess) {
      (void)Api::get_last_error();
      throw InputError("raw_handle", std::string(Api::kIpcOpen) + " refused it: " + Api::error_string(rc));
    }
  }
  ~GpuIpcMemory() override {
    (void)Api::set_device(device_id_);
    if (flag_) (void)Api::free(flag_);
    if (stream_) (void)Api::stream_destroy(stream_);
    (void)Api::ipc_close(ptr_);
  }
  std::size_t size() const override { return size_; }
  int device_id() const override { return device_id_; }
  std::string_view backend() const override { return Api::kBackend; }
  const void* device_ptr() const override { return ptr_; }
  bool all_finite_f32(std::size_t offset, std::size_t count) const override {
    if (offset > size_ || count > (size_ - offset) / sizeof(float))
      throw InputError("shared_memory_offset", std::to_string(offset) + " + " + std::to_string(count) +
                                                   " floats run past the " + std::to_string(size_) + "-byte " +
                                                   vendor() + " region");
    std::lock_guard lock(check_mu_);  // one flag and stream per region
    Api::check(name(), Api::kSetDevice, Api::set_device(device_id_));
    if (!stream_) {
      Api::check(name(), Api::kStreamCreate, Api::stream_create(&stream_));
      void* flag = nullptr;
      Api::check(name(), Api::kMalloc, Api::malloc(&flag, sizeof(unsigned int)));
      flag_ = static_cast<unsigned int*>(flag);
    }
    unsigned int found = 0;
    Api::check(name(), Api::kMemset, Api::memset_async(flag_, 0, sizeof *flag_, stream_));
    Api::check(name(), "flag_non_finite",
               Api::flag_non_finite(reinterpret_cast<const float*>(static_cast<const char*>(ptr_) + offset),
                                    count, flag_, stream_));
    Api::check(name(), Api::kMemcpyD2H, Api::memcpy_d2h_async(&found, flag_, sizeof found, stream_));
    Api::check(name(), Api::kStreamSynchronize, Api::stream_synchronize(stream_));
    return found == 0;
  }
  void read(std::size_t offset, void* dst, std::size_t n) const override {
    check(offset, n);
    Api::check(name(), Api::kMemcpyD2HSync, Api::memcpy_d2h(dst, static_cast<const char*>(ptr_) + offset, n));
  }
  void write(std::size_t offset, const void* src, std::size_t n) const override {
    check(offset, n);
    Api::check(name(), Api::kMemcpyH2DSync, Api::memcpy_h2d(static_cast<char*>(ptr_) + offset, src, n));
  }

 private:
  static std::string vendor() { return Api::kVendor; }
  void check(std::size_t offset, std::size_t n) const {
    if (offset > size_ || n > size_ - offset)
      throw InputError("shared_memory_offset", std::to_string(offset) + " + " + std::to_string(n) +
                                                   " bytes run past the " + std::to_string(size_) + "-byte " +
                                                   vendor() + " region");
  }
  std::string name() const { return std::string(Api::kBackend) + ":" + std::to_string(device_id_); }
  void* ptr_ = nullptr;
  int device_id_;
  std::size_t size_;
  mutable std::mutex check_mu_;
  mutable typename Api::Stream stream_ = nullptr;
  mutable unsigned int* flag_ = nullptr;
};

// Opens a serialised IPC handle of Api's runtime on device `device_id`: InputError naming raw_handle
// (wrong size, or refused by the runtime) or device_id (not a device of this host).
template <class Api>
std::shared_ptr<DeviceIpcMemory> open_gpu_ipc_memory(std::string_view handle, int device_id,
                                                     std::size_t byte_size) {
  using Handle = typename Api::IpcHandle;
  static_assert(sizeof(Handle) == kGpuIpcHandleBytes);
  if (handle.size() != sizeof(Handle))
    throw InputError("raw_handle", std::to_string(handle.size()) + " bytes; a serialised " +
                                       std::string(Api::kIpcHandle) + " has " + std::to_string(sizeof(Handle)));
  Handle h;
  std::memcpy(&h, handle.data(), sizeof h);
  return std::make_shared<GpuIpcMemory<Api>>(h, device_id, byte_size);
}

// How many devices Api's runtime sees here (0 when it cannot say: no driver, no device).
template <class Api>
int gpu_ipc_device_count() {
  int n = 0;
  if (Api::device_count(&n) != Api::kSuccess) {
    (void)Api::get_last_error();
    return 0;
  }
  return n;
}

}  // namespace dype::hw
