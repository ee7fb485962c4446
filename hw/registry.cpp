#include "hw/registry.h"

#include "hw/cpu/cpu_backend.h"
#include "hw/emu/emu_backend.h"
#if DYPE_HAVE_CUDA
#include "hw/cuda/cuda_backend.h"
#endif
#if DYPE_HAVE_HIP
#include "hw/hip/hip_backend.h"
#endif
#if DYPE_HAVE_XRT
#include "hw/xrt/xrt_backend.h"
#endif

namespace dype::hw {

const std::vector<Backend>& backends() {
  // The compiled-in backends. hw/cuda, hw/hip and hw/xrt add themselves here behind
  // DYPE_HAVE_CUDA / DYPE_HAVE_HIP / DYPE_HAVE_XRT.
  static const std::vector<Backend> list = {
      cpu_backend(),
      emu_backend(),
#if DYPE_HAVE_CUDA
      cuda_backend(),
#endif
#if DYPE_HAVE_HIP
      hip_backend(),
#endif
#if DYPE_HAVE_XRT
      xrt_backend(),
#endif
  };
  return list;
}

const Backend* find_backend(std::string_view name) {
  for (const auto& b : backends()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

SystemConfig detect_system_config() {
  SystemConfig cfg;
  cfg.name = "detected";
  cfg.description = "CPU plus the devices the compiled backends found";
  for (const auto& b : backends()) {
    if (!b.detect) continue;
    for (auto& d : b.detect()) {
      d.key_path = "detected[" + std::to_string(cfg.devices.size()) + "]";
      cfg.devices.push_back(std::move(d));
    }
  }
  settle_transfers(cfg);
  return cfg;
}

}  // namespace dype::hw
