// Which GPU runtime opens a client's IPC handle, and the runtimes a build leaves out: their
// open_* answers that they are not built in.
#include "hw/device_ipc_memory.h"

#include "common/error.h"

namespace dype::hw {

#ifndef DYPE_HAVE_CUDA
std::shared_ptr<DeviceIpcMemory> open_cuda_ipc_memory(std::string_view, int, std::size_t) {
  throw Error("CUDA shared memory: this dype-serve was built without CUDA");
}
int cuda_ipc_device_count() { return -1; }
#endif

#ifndef DYPE_HAVE_HIP
std::shared_ptr<DeviceIpcMemory> open_hip_ipc_memory(std::string_view, int, std::size_t) {
  throw Error("HIP shared memory: this dype-serve was built without HIP");
}
int hip_ipc_device_count() { return -1; }
#endif

bool gpu_ipc_built() { return !gpu_ipc_backend().empty(); }

std::string_view gpu_ipc_backend() {
  // Asked once: the runtimes' device counts do not change while the process runs.
  static const std::string_view backend = [] {
    // CUDA first; HIP's runtime is only loaded when CUDA sees no device.
    const int cuda = cuda_ipc_device_count();
    if (cuda > 0) return std::string_view("cuda");
    const int hip = hip_ipc_device_count();
    if (hip > 0) return std::string_view("hip");
    if (cuda >= 0) return std::string_view("cuda");
    if (hip >= 0) return std::string_view("hip");
    return std::string_view();
  }();
  return backend;
}

std::shared_ptr<DeviceIpcMemory> open_device_ipc_memory(std::string_view handle, int device_id,
                                                        std::size_t byte_size) {
  const std::string_view backend = gpu_ipc_backend();
  if (backend == "cuda") return open_cuda_ipc_memory(handle, device_id, byte_size);
  if (backend == "hip") return open_hip_ipc_memory(handle, device_id, byte_size);
  throw Error("CUDA shared memory: this dype-serve was built without CUDA or HIP");
}

}  // namespace dype::hw
