#pragma once
// Backend registry (ggml-backend-reg style): the compiled-in backends, each able to create a
// device from its config entry and to detect the real devices present. The list is explicit
// (registry.cpp), not self-registration, so static linking cannot drop a backend. A new backend
// hw/<name>/ adds one line there behind its DYPE_HAVE_<NAME> flag.
#include <string_view>
#include <vector>

#include "hw/backend.h"
#include "hw/system_config.h"

namespace dype::hw {

const std::vector<Backend>& backends();
const Backend* find_backend(std::string_view name);

// Detection mode: the CPU plus whatever devices the compiled real backends report.
SystemConfig detect_system_config();

}  // namespace dype::hw
