#pragma once
// Runs a KernelLaunch whose buffers hold host memory with the CPU kernels (kernels/cpu). Shared by
// the cpu backend and the emu backend (which computes real results this way).
#include "hw/kernel_launch.h"

namespace dype::hw {

// Requires validate(launch) to have passed and every buffer to hold data.
void run_on_host(const KernelLaunch& launch);

}  // namespace dype::hw
