#include "hw/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include "hw/cuda/cuda_device.h"
#include "hw/cuda/cuda_nvml.h"
#include "kernels/cuda/launch_plan.h"

namespace dype::hw {

std::vector<DeviceConfig> detect_cuda_devices(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    const std::string reason = kernels::cuda::format_error("cuda", "cudaGetDeviceCount", rc, cudaGetErrorName(rc),
                                                           cudaGetErrorString(rc));
    if (why) *why = reason;
    spdlog::info("no CUDA devices: {}", reason);
    return {};
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount reports 0 devices";
  std::string nvml_why;
  auto nvml = Nvml::load(&nvml_why);
  std::vector<DeviceConfig> out;
  for (int i = 0; i < count; ++i) {
    DeviceConfig d;
    d.name = "gpu" + std::to_string(i);
    d.backend = "cuda";
    d.kind = DeviceKind::gpu;
    d.ordinal = i;
    d.link.type = LinkType::pcie;
    char bus[32] = {};
    if (nvml && cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) {
      if (auto link = nvml->pcie_link(bus)) {
        d.link.generation = link->first;
        d.link.lanes = link->second;
      }
    }
    for (int j = 0; j < count; ++j) {
      int can = 0;
      if (j != i && cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess && can) d.p2p = true;
    }
    out.push_back(std::move(d));
  }
  return out;
}

Backend cuda_backend() {
  Backend b;
  b.name = "cuda";
  b.create = [](const DeviceConfig& dc, const SystemConfig& sys) -> DevicePtr {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || dc.ordinal < 0 || dc.ordinal >= count) {
      (void)cudaGetLastError();
      throw InputError(sys.file + ": " + dc.key_path + ".ordinal",
                       "no CUDA device " + std::to_string(dc.ordinal) + " (" +
                           (rc != cudaSuccess ? std::string(cudaGetErrorString(rc))
                                              : std::to_string(count) + " present") + ")");
    }
    DeviceInfo info = cuda_device_info(dc.ordinal, dc.name);
    if (dc.profile) info.product += " (model: " + dc.profile->product + ")";
    info.power = dc.power;
    CudaOptions opt;
    opt.allow_p2p = dc.p2p;
    opt.overlap_copies = sys.overlap_transfers;
    return std::make_unique<CudaDevice>(std::move(info), dc.ordinal, opt);
  };
  b.detect = [] { return detect_cuda_devices(); };
  return b;
}

}  // namespace dype::hw
