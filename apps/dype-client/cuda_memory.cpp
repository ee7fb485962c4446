// --cuda-shm memory on the CUDA runtime (gpu_memory.h), or, in a build without it, an Error saying so.
#include "gpu_memory.h"

#ifdef DYPE_HAVE_CUDA
#include "hw/cuda/cuda_runtime.h"
#endif

namespace dype::client {

std::unique_ptr<CudaClientRegion::Memory> cuda_memory(const std::string& name, std::size_t bytes, int device) {
#ifdef DYPE_HAVE_CUDA
  return std::make_unique<ApiMemory<hw::CudaRuntime>>(name, bytes, device);
#else
  (void)name;
  (void)bytes;
  (void)device;
  throw Error("--cuda-shm: this dype-client was built without CUDA");
#endif
}

}  // namespace dype::client
