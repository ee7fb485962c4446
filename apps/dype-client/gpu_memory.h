#pragma once
// GPU memory for --cuda-shm through one runtime map (hw/cuda/cuda_runtime.h, hw/hip/hip_runtime.h),
// instantiated in a translation unit of each runtime's own (cuda_memory.cpp, hip_memory.cpp): the
// CUDA and HIP headers cannot meet in one.
#include <cstddef>
#include <memory>
#include <string>

#include "common/error.h"
#include "cuda_region.h"

namespace dype::client {

// GPU memory of one runtime's, with the handle another process opens it by.
class CudaClientRegion::Memory {
 public:
  virtual ~Memory() = default;
  virtual std::string handle() const = 0;
  virtual void write(const void* src, std::size_t n) = 0;
  virtual void read(std::size_t offset, void* dst, std::size_t n) const = 0;
};

// hipMalloc'd or cudaMalloc'd memory through the runtime map Api (hw/cuda/cuda_runtime.h,
// hw/hip/hip_runtime.h); errors say which call failed and the runtime's reason.
template <class Api>
class ApiMemory final : public CudaClientRegion::Memory {
 public:
  ApiMemory(const std::string& name, std::size_t bytes, int device) : name_(name), device_(device) {
    int count = 0;
    check(Api::device_count(&count), std::string("no ") + Api::kVendor + " device here");
    if (device < 0 || device >= count)
      throw InputError("--cuda-device", std::to_string(device) + " is not one of this host's " +
                                            std::to_string(count) + " " + Api::kVendor + " devices");
    check(Api::set_device(device), std::string(Api::kSetDevice) + "(" + std::to_string(device) + ")");
    check(Api::malloc(&ptr_, bytes), std::string(Api::kMalloc) + "(" + std::to_string(bytes) + " bytes)");
    try {
      check(Api::ipc_get_handle(&handle_, ptr_), Api::kIpcGetHandle);
    } catch (...) {
      (void)Api::free(ptr_);
      throw;
    }
  }
  ~ApiMemory() override {
    (void)Api::set_device(device_);
    (void)Api::free(ptr_);
  }
  std::string handle() const override { return std::string(reinterpret_cast<const char*>(&handle_), sizeof handle_); }
  void write(const void* src, std::size_t n) override {
    check(Api::set_device(device_), Api::kSetDevice);
    check(Api::memcpy_h2d(ptr_, src, n), std::string(Api::kMemcpyH2DSync) + " (host -> " + name_ + ")");
  }
  void read(std::size_t offset, void* dst, std::size_t n) const override {
    check(Api::set_device(device_), Api::kSetDevice);
    check(Api::memcpy_d2h(dst, static_cast<const char*>(ptr_) + offset, n),
          std::string(Api::kMemcpyD2HSync) + " (" + name_ + " -> host)");
  }

 private:
  static void check(typename Api::Error rc, const std::string& what) {
    if (rc == Api::kSuccess) return;
    (void)Api::get_last_error();
    throw Error("--cuda-shm: " + what + ": " + Api::error_string(rc));
  }
  std::string name_;
  int device_;
  void* ptr_ = nullptr;
  typename Api::IpcHandle handle_{};
};

// Each defined where its runtime is built (cuda_memory.cpp, hip_memory.cpp): `device`'s memory of
// `bytes`, named `name` in errors.
std::unique_ptr<CudaClientRegion::Memory> cuda_memory(const std::string& name, std::size_t bytes, int device);
std::unique_ptr<CudaClientRegion::Memory> hip_memory(const std::string& name, std::size_t bytes, int device);

}  // namespace dype::client
