#pragma once
// Backend registry (ggml-backend-reg style): every backend dype knows, and the compiled-in ones,
// each able to create a device from its config entry and to detect the real devices present. The
// list is explicit (registry.cpp), not self-registration, so static linking cannot drop a backend.
// A new backend hw/<name>/ adds one entry there behind its DYPE_HAVE_<NAME> flag; system files
// (system_file.h) accept its name from then on.
#include <string>
#include <string_view>
#include <vector>

#include "hw/backend.h"
#include "hw/system_config.h"

namespace dype::hw {

// The compiled-in backends.
const std::vector<Backend>& backends();
const Backend* find_backend(std::string_view name);
// Every backend's name, compiled in or not (cpu, emu, cuda, hip, xrt): what a system file may name.
const std::vector<std::string>& backend_names();

// Detection mode: the CPU plus whatever devices the compiled real backends report.
SystemConfig detect_system_config();

}  // namespace dype::hw
