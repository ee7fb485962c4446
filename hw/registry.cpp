#include "hw/registry.h"

#include "hw/cpu/cpu_backend.h"
#include "hw/emu/emu_backend.h"

namespace dype::hw {

const std::vector<Backend>& backends() {
  // The compiled-in backends. hw/cuda, hw/hip and hw/xrt add themselves here behind
  // DYPE_HAVE_CUDA / DYPE_HAVE_HIP / DYPE_HAVE_XRT.
  static const std::vector<Backend> list = {cpu_backend(), emu_backend()};
  return list;
}

const Backend* find_backend(std::string_view name) {
  for (const auto& b : backends()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace dype::hw
