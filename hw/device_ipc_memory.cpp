// Builds without CUDA: the CUDA shared-memory extension answers that it is not built in.
#include "hw/device_ipc_memory.h"

#include "common/error.h"

#ifndef DYPE_HAVE_CUDA
namespace dype::hw {

std::shared_ptr<DeviceIpcMemory> open_cuda_ipc_memory(std::string_view, int, std::size_t) {
  throw Error("CUDA shared memory: this dype-serve was built without CUDA");
}

bool cuda_ipc_built() {
  return false;
}

}  // namespace dype::hw
#endif
