#include "hw/registry.h"

#include <stdexcept>

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

namespace {

// Every backend dype knows, in the order messages list them. `make` is null where this build
// lacks the backend: a system file may still name it (its devices are planned from their models;
// System::from_config says what to configure to run them).
struct KnownBackend {
  std::string_view name;
  Backend (*make)();
};

// clang-format off
constexpr KnownBackend kKnown[] = {
    {"cpu", cpu_backend},
    {"emu", emu_backend},
#if DYPE_HAVE_CUDA
    {"cuda", cuda_backend},
#else
    {"cuda", nullptr},
#endif
#if DYPE_HAVE_HIP
    {"hip", hip_backend},
#else
    {"hip", nullptr},
#endif
#if DYPE_HAVE_XRT
    {"xrt", xrt_backend},
#else
    {"xrt", nullptr},
#endif
};
// clang-format on

}  // namespace

const std::vector<Backend>& backends() {
  static const std::vector<Backend> list = [] {
    std::vector<Backend> out;
    for (const KnownBackend& k : kKnown) {
      if (!k.make) continue;
      out.push_back(k.make());
      if (out.back().name != k.name)
        throw std::logic_error("backend '" + out.back().name + "' is listed as '" +
                               std::string(k.name) + "'");
    }
    return out;
  }();
  return list;
}

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const KnownBackend& k : kKnown) out.emplace_back(k.name);
    return out;
  }();
  return names;
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
