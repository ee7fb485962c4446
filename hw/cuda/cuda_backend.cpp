#include "hw/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include "hw/cuda/cuda_device.h"
#include "hw/cuda/cuda_nvml.h"
#include "hw/detected_profile.h"
#include "kernels/cuda/launch_plan.h"

namespace dype::hw {

namespace {

int attribute(cudaDeviceAttr attr, int ordinal) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return v;
}

}  // namespace

AcceleratorAttributes cuda_attributes(int ordinal, const Nvml* nvml) {
  AcceleratorAttributes a;
  a.vendor = "nvidia";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, ordinal) == cudaSuccess) {
    a.product = p.name;
    a.memory_bytes = p.totalGlobalMem;
  } else {
    (void)cudaGetLastError();
  }
  // Attributes, not cudaDeviceProp fields: CUDA 13 dropped the clock fields from the struct.
  a.compute_major = attribute(cudaDevAttrComputeCapabilityMajor, ordinal);
  a.compute_minor = attribute(cudaDevAttrComputeCapabilityMinor, ordinal);
  a.arch = "sm_" + std::to_string(a.compute_major) + std::to_string(a.compute_minor);
  a.multiprocessors = attribute(cudaDevAttrMultiProcessorCount, ordinal);
  a.clock_khz = attribute(cudaDevAttrClockRate, ordinal);
  a.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, ordinal);
  a.memory_bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, ordinal);
  a.l2_bytes = static_cast<std::size_t>(attribute(cudaDevAttrL2CacheSize, ordinal));
  a.max_threads_per_multiprocessor = attribute(cudaDevAttrMaxThreadsPerMultiProcessor, ordinal);
  a.copy_engines = attribute(cudaDevAttrAsyncEngineCount, ordinal);
  char bus[32] = {};
  if (nvml && cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) {
    if (auto link = nvml->pcie_link(bus)) {
      a.pcie_generation = link->first;
      a.pcie_lanes = link->second;
    }
    if (auto limit = nvml->power_limit_w(bus)) a.power_limit_w = *limit;
  }
  return a;
}

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
    const AcceleratorAttributes attrs = cuda_attributes(i, nvml.get());
    apply_detected_profile(d, attrs);
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
    if (dc.profile && dc.profile->source == ProfileSource::file) info.product += " (model: " + dc.profile->product + ")";
    info.power = dc.power;
    CudaOptions opt;
    opt.allow_p2p = dc.p2p;
    opt.overlap_copies = sys.overlap_transfers;
    return std::make_unique<CudaDevice>(std::move(info), dc.ordinal, opt);
  };
  b.detect = [] { return detect_cuda_devices(); };
  b.describe = [](const DeviceConfig& dc) -> std::optional<AcceleratorAttributes> {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || dc.ordinal < 0 || dc.ordinal >= count) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    std::string why;
    auto nvml = Nvml::load(&why);
    return cuda_attributes(dc.ordinal, nvml.get());
  };
  return b;
}

}  // namespace dype::hw
