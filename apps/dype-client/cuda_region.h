#pragma once
// GPU memory dype-client allocates and registers with dype-serve as a region of Triton's CUDA
// shared-memory extension (dype-serve --allow-client-shm, on a CUDA or HIP build): cudaMalloc and
// cudaIpcGetMemHandle (hipMalloc and hipIpcGetMemHandle where the host's GPUs answer to HIP, as
// dype-serve chooses: hw::gpu_ipc_backend), and the handle's 64 bytes sent as raw_handle with the
// device's index. x is copied into it once and y read back from it; the daemon reads x where it
// lies (on that very GPU, with no host copy). Unregistered and freed when it goes, also when the
// request failed.
//
//   CudaClientRegion x(transport, "x", bytes, /*device=*/0);   x.write(features, bytes);
//   Tensor t = x.tensor("x", "FP32", {n, f});   // names the region, carries no bytes
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shm_region.h"
#include "transport.h"

namespace dype::client {

class CudaClientRegion : public NamedRegion {
 public:
  // The region's name is dype-client-<pid>-cuda-<role>. Error when there is no such GPU device
  // or the allocation fails (the runtime's message), or the daemon refuses the region.
  CudaClientRegion(Transport& transport, const std::string& role, std::size_t bytes, int device);
  ~CudaClientRegion() override;
  CudaClientRegion(const CudaClientRegion&) = delete;
  CudaClientRegion& operator=(const CudaClientRegion&) = delete;

  void write(const void* src, std::size_t n) override;
  void read(std::size_t offset, void* dst, std::size_t n) const override;

  class Memory;  // the runtime's allocation (cuda_region.cpp)

 private:
  Transport& transport_;
  std::unique_ptr<Memory> memory_;
  bool registered_ = false;
};

// A region of `bytes` for --shm (system shared memory) or, given a GPU device, --cuda-shm.
std::unique_ptr<NamedRegion> make_region(Transport& transport, const std::string& role,
                                         std::size_t bytes, std::optional<int> cuda_device);

}  // namespace dype::client
