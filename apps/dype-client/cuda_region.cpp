#include "cuda_region.h"

#include <unistd.h>

#include <iostream>

#include "common/error.h"
#include "gpu_memory.h"
#include "hw/device_ipc_memory.h"

namespace dype::client {
namespace {

// Memory of the runtime whose devices this host has (hw::gpu_ipc_backend, as dype-serve opens
// handles), or Error when this dype-client has neither runtime.
std::unique_ptr<CudaClientRegion::Memory> gpu_memory(const std::string& name, std::size_t bytes, int device) {
  const std::string_view backend = hw::gpu_ipc_backend();
  if (backend == "cuda") return cuda_memory(name, bytes, device);
  if (backend == "hip") return hip_memory(name, bytes, device);
  throw Error("--cuda-shm: this dype-client was built without CUDA or HIP");
}

}  // namespace

CudaClientRegion::CudaClientRegion(Transport& transport, const std::string& role, std::size_t bytes,
                                   int device)
    : NamedRegion("dype-client-" + std::to_string(getpid()) + "-cuda-" + role, bytes),
      transport_(transport),
      memory_(gpu_memory(name_, bytes, device)) {
  transport_.register_cuda_region(name_, memory_->handle(), device, bytes_);
  registered_ = true;
}

CudaClientRegion::~CudaClientRegion() {
  if (!registered_) return;
  try {
    transport_.unregister_cuda_region(name_);
  } catch (const std::exception& e) {
    std::cerr << "dype-client: could not unregister CUDA shared-memory region " << name_ << ": " << e.what()
              << "\n";
  }
}

void CudaClientRegion::write(const void* src, std::size_t n) {
  check_range(0, n);
  memory_->write(src, n);
}

void CudaClientRegion::read(std::size_t offset, void* dst, std::size_t n) const {
  check_range(offset, n);
  memory_->read(offset, dst, n);
}

std::unique_ptr<NamedRegion> make_region(Transport& transport, const std::string& role,
                                         std::size_t bytes, std::optional<int> cuda_device) {
  if (cuda_device) return std::make_unique<CudaClientRegion>(transport, role, bytes, *cuda_device);
  return std::make_unique<ClientRegion>(transport, role, bytes);
}

}  // namespace dype::client
