// --cuda-shm memory on the HIP runtime (gpu_memory.h), or, in a build without it, an Error saying so.
#include "gpu_memory.h"

#ifdef DYPE_HAVE_HIP
#include "hw/hip/hip_runtime.h"
#endif

namespace dype::client {

std::unique_ptr<CudaClientRegion::Memory> hip_memory(const std::string& name, std::size_t bytes, int device) {
#ifdef DYPE_HAVE_HIP
  return std::make_unique<ApiMemory<hw::HipRuntime>>(name, bytes, device);
#else
  (void)name;
  (void)bytes;
  (void)device;
  throw Error("--cuda-shm: this dype-client was built without HIP");
#endif
}

}  // namespace dype::client
