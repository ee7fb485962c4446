#pragma once
// The cpu backend: creates CpuDevice from a config entry; detection always finds the host CPU.
#include "hw/backend.h"

namespace dype::hw {
Backend cpu_backend();
}
