#pragma once
// The emu backend: creates EmuDevice (emulated GPU/FPGA) from a config entry with a device model.
// Detection finds nothing (emulated devices exist only when a system config asks for them).
#include "hw/backend.h"

namespace dype::hw {
Backend emu_backend();
}
