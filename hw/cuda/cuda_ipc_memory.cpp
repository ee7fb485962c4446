// CUDA IPC memory (hw/device_ipc_memory.h) on the CUDA runtime.
#include <cstring>
#include <mutex>
#include <string>

#include <cuda_runtime_api.h>

#include "common/error.h"
#include "hw/cuda/cuda_runtime.h"
#include "hw/device_ipc_memory.h"
#include "kernels/cuda/kernels.h"

namespace dype::hw {
namespace {

class CudaIpcMemory final : public DeviceIpcMemory {
 public:
  CudaIpcMemory(const cudaIpcMemHandle_t& handle, int device_id, std::size_t byte_size)
      : device_id_(device_id), size_(byte_size) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device_id < 0 || device_id >= count)
      throw InputError("device_id", std::to_string(device_id) +
                                        " is not a CUDA device of this host (" +
                                        std::to_string(count) + " found)");
    cuda_check("cuda:" + std::to_string(device_id), "cudaSetDevice", cudaSetDevice(device_id));
    const cudaError_t rc = cudaIpcOpenMemHandle(&ptr_, handle, cudaIpcMemLazyEnablePeerAccess);
    if (rc != cudaSuccess)
      throw InputError("raw_handle",
                       std::string("cudaIpcOpenMemHandle refused it: ") + cudaGetErrorString(rc));
  }
  ~CudaIpcMemory() override {
    cudaSetDevice(device_id_);
    if (flag_) cudaFree(flag_);
    if (stream_) cudaStreamDestroy(stream_);
    cudaIpcCloseMemHandle(ptr_);
  }
  std::size_t size() const override { return size_; }
  int device_id() const override { return device_id_; }
  std::string_view backend() const override { return "cuda"; }
  const void* device_ptr() const override { return ptr_; }
  bool all_finite_f32(std::size_t offset, std::size_t count) const override {
    if (offset > size_ || count > (size_ - offset) / sizeof(float))
      throw InputError("shared_memory_offset", std::to_string(offset) + " + " +
                                                   std::to_string(count) + " floats run past the " +
                                                   std::to_string(size_) + "-byte CUDA region");
    std::lock_guard lock(check_mu_);  // one flag and stream per region
    cuda_check(name(), "cudaSetDevice", cudaSetDevice(device_id_));
    if (!stream_) {
      cuda_check(name(), "cudaStreamCreateWithFlags",
                 cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      cuda_check(name(), "cudaMalloc", cudaMalloc(reinterpret_cast<void**>(&flag_), sizeof *flag_));
    }
    unsigned int found = 0;
    cuda_check(name(), "cudaMemsetAsync", cudaMemsetAsync(flag_, 0, sizeof *flag_, stream_));
    cuda_check(name(), "flag_non_finite",
               kernels::cuda::flag_non_finite(
                   reinterpret_cast<const float*>(static_cast<const char*>(ptr_) + offset), count,
                   flag_, stream_));
    cuda_check(name(), "cudaMemcpyAsync(D2H)",
               cudaMemcpyAsync(&found, flag_, sizeof found, cudaMemcpyDeviceToHost, stream_));
    cuda_check(name(), "cudaStreamSynchronize", cudaStreamSynchronize(stream_));
    return found == 0;
  }
  void read(std::size_t offset, void* dst, std::size_t n) const override {
    check(offset, n);
    cuda_check(name(), "cudaMemcpy(D2H)",
               cudaMemcpy(dst, static_cast<char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost));
  }
  void write(std::size_t offset, const void* src, std::size_t n) const override {
    check(offset, n);
    cuda_check(name(), "cudaMemcpy(H2D)",
               cudaMemcpy(static_cast<char*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice));
  }

 private:
  void check(std::size_t offset, std::size_t n) const {
    if (offset > size_ || n > size_ - offset)
      throw InputError("shared_memory_offset", std::to_string(offset) + " + " + std::to_string(n) +
                                                   " bytes run past the " + std::to_string(size_) +
                                                   "-byte CUDA region");
  }
  std::string name() const { return "cuda:" + std::to_string(device_id_); }
  void* ptr_ = nullptr;
  int device_id_;
  std::size_t size_;
  mutable std::mutex check_mu_;
  mutable cudaStream_t stream_ = nullptr;
  mutable unsigned int* flag_ = nullptr;
};

}  // namespace

std::shared_ptr<DeviceIpcMemory> open_cuda_ipc_memory(std::string_view handle, int device_id,
                                                      std::size_t byte_size) {
  if (handle.size() != sizeof(cudaIpcMemHandle_t))
    throw InputError("raw_handle", std::to_string(handle.size()) +
                                       " bytes; a serialised cudaIpcMemHandle_t has " +
                                       std::to_string(sizeof(cudaIpcMemHandle_t)));
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof h);
  return std::make_shared<CudaIpcMemory>(h, device_id, byte_size);
}

bool cuda_ipc_built() {
  return true;
}

static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes);

}  // namespace dype::hw
