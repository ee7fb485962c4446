#pragma once
// One served model's engine as the service's helpers see it (device administration, the runtime's
// metrics): the protocol's model name and its rt::Engine, owned by EngineService.
#include <string>

#include "runtime/engine.h"

namespace dype::rt::daemon {

struct ServedEngine {
  std::string name;
  Engine* engine = nullptr;
};

}  // namespace dype::rt::daemon
