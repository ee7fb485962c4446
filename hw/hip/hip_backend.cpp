#include "hw/hip/hip_backend.h"

#include <hip/hip_runtime_api.h>
#include <spdlog/spdlog.h>

#include "hw/hip/hip_device.h"
#include "kernels/hip/launch_plan.h"

namespace dype::hw {

AcceleratorAttributes hip_attributes(int ordinal) {
  AcceleratorAttributes a;
  a.vendor = "amd";
  const auto attribute = [ordinal](hipDeviceAttribute_t attr) {
    int v = 0;
    if (hipDeviceGetAttribute(&v, attr, ordinal) != hipSuccess) {
      (void)hipGetLastError();
      return 0;
    }
    return v;
  };
  hipDeviceProp_t p{};
  if (hipGetDeviceProperties(&p, ordinal) == hipSuccess) {
    a.product = p.name;
    a.memory_bytes = p.totalGlobalMem;
    const std::string arch = p.gcnArchName;  // "gfx90a:sramecc+:xnack-"
    a.arch = arch.substr(0, arch.find(':'));
  } else {
    (void)hipGetLastError();
  }
  a.multiprocessors = attribute(hipDeviceAttributeMultiprocessorCount);
  a.clock_khz = attribute(hipDeviceAttributeClockRate);
  a.memory_clock_khz = attribute(hipDeviceAttributeMemoryClockRate);
  a.memory_bus_bits = attribute(hipDeviceAttributeMemoryBusWidth);
  a.l2_bytes = static_cast<std::size_t>(attribute(hipDeviceAttributeL2CacheSize));
  a.max_threads_per_multiprocessor = attribute(hipDeviceAttributeMaxThreadsPerMultiProcessor);
  // HIP answers this attribute on NVIDIA only; AMD GPUs have a DMA engine per direction (SDMA).
  a.copy_engines = attribute(hipDeviceAttributeAsyncEngineCount);
  if (a.copy_engines == 0) a.copy_engines = 2;
  return a;
}

std::vector<DeviceConfig> detect_hip_devices(std::string* why) {
  int count = 0;
  const hipError_t rc = hipGetDeviceCount(&count);
  if (rc != hipSuccess) {
    (void)hipGetLastError();
    const std::string reason =
        kernels::hip::format_error("hip", "hipGetDeviceCount", rc, hipGetErrorName(rc), hipGetErrorString(rc));
    if (why) *why = reason;
    spdlog::info("no HIP devices: {}", reason);
    return {};
  }
  if (count == 0 && why) *why = "hipGetDeviceCount reports 0 devices";
  std::vector<DeviceConfig> out;
  for (int i = 0; i < count; ++i) {
    DeviceConfig d;
    // Named like the cuda backend's GPUs; a machine with both kinds renames one set in its config.
    d.name = "gpu" + std::to_string(i);
    d.backend = "hip";
    d.kind = DeviceKind::gpu;
    d.ordinal = i;
    d.link.type = LinkType::pcie;
    apply_detected_profile(d, hip_attributes(i));
    for (int j = 0; j < count; ++j) {
      int can = 0;
      if (j != i && hipDeviceCanAccessPeer(&can, i, j) == hipSuccess && can) d.p2p = true;
    }
    out.push_back(std::move(d));
  }
  return out;
}

Backend hip_backend() {
  Backend b;
  b.name = "hip";
  b.create = [](const DeviceConfig& dc, const SystemConfig& sys) -> DevicePtr {
    int count = 0;
    const hipError_t rc = hipGetDeviceCount(&count);
    if (rc != hipSuccess || dc.ordinal < 0 || dc.ordinal >= count) {
      (void)hipGetLastError();
      throw InputError(sys.file + ": " + dc.key_path + ".ordinal",
                       "no HIP device " + std::to_string(dc.ordinal) + " (" +
                           (rc != hipSuccess ? std::string(hipGetErrorString(rc))
                                             : std::to_string(count) + " present") + ")");
    }
    DeviceInfo info = hip_device_info(dc.ordinal, dc.name);
    if (dc.profile && dc.profile->source == ProfileSource::file) info.product += " (model: " + dc.profile->product + ")";
    info.power = dc.power;
    HipOptions opt;
    opt.allow_p2p = dc.p2p;
    opt.overlap_copies = sys.overlap_transfers;
    return std::make_unique<HipDevice>(std::move(info), dc.ordinal, opt);
  };
  b.detect = [] { return detect_hip_devices(); };
  b.describe = [](const DeviceConfig& dc) -> std::optional<AcceleratorAttributes> {
    int count = 0;
    if (hipGetDeviceCount(&count) != hipSuccess || dc.ordinal < 0 || dc.ordinal >= count) {
      (void)hipGetLastError();
      return std::nullopt;
    }
    return hip_attributes(dc.ordinal);
  };
  return b;
}

}  // namespace dype::hw
