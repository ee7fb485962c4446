#include "cuda_region.h"

#include <unistd.h>

#include <iostream>

#include "common/error.h"

#ifdef DYPE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dype::client {

#ifdef DYPE_HAVE_CUDA
namespace {
void check(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error("--cuda-shm: " + what + ": " + cudaGetErrorName(rc) + " (" +
                cudaGetErrorString(rc) + ")");
  }
}
}  // namespace

CudaClientRegion::CudaClientRegion(Transport& transport, const std::string& role, std::size_t bytes,
                                   int device)
    : NamedRegion("dype-client-" + std::to_string(getpid()) + "-cuda-" + role, bytes),
      transport_(transport),
      device_(device) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "no CUDA device here (cudaGetDeviceCount)");
  if (device < 0 || device >= count)
    throw InputError("--cuda-device", std::to_string(device) + " is not one of this host's " +
                                          std::to_string(count) + " CUDA devices");
  check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  check(cudaMalloc(&ptr_, bytes_), "cudaMalloc(" + std::to_string(bytes_) + " bytes)");
  try {
    cudaIpcMemHandle_t handle;
    check(cudaIpcGetMemHandle(&handle, ptr_), "cudaIpcGetMemHandle");
    transport_.register_cuda_region(
        name_, std::string(reinterpret_cast<const char*>(&handle), sizeof handle), device, bytes_);
    registered_ = true;
  } catch (...) {
    (void)cudaFree(ptr_);
    throw;
  }
}

CudaClientRegion::~CudaClientRegion() {
  if (registered_) {
    try {
      transport_.unregister_cuda_region(name_);
    } catch (const std::exception& e) {
      std::cerr << "dype-client: could not unregister CUDA shared-memory region " << name_ << ": "
                << e.what() << "\n";
    }
  }
  (void)cudaSetDevice(device_);
  (void)cudaFree(ptr_);
}

void CudaClientRegion::write(const void* src, std::size_t n) {
  check_range(0, n);
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemcpy(ptr_, src, n, cudaMemcpyHostToDevice), "cudaMemcpy(host -> " + name_ + ")");
}

void CudaClientRegion::read(std::size_t offset, void* dst, std::size_t n) const {
  check_range(offset, n);
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost),
        "cudaMemcpy(" + name_ + " -> host)");
}
#else
CudaClientRegion::CudaClientRegion(Transport& transport, const std::string&, std::size_t, int)
    : NamedRegion("", 0), transport_(transport) {
  throw Error("--cuda-shm: this dype-client was built without CUDA");
}
CudaClientRegion::~CudaClientRegion() = default;
void CudaClientRegion::write(const void*, std::size_t) {}
void CudaClientRegion::read(std::size_t, void*, std::size_t) const {}
#endif

std::unique_ptr<NamedRegion> make_region(Transport& transport, const std::string& role,
                                         std::size_t bytes, std::optional<int> cuda_device) {
  if (cuda_device) return std::make_unique<CudaClientRegion>(transport, role, bytes, *cuda_device);
  return std::make_unique<ClientRegion>(transport, role, bytes);
}

}  // namespace dype::client
