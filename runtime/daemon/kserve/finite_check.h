#pragma once
// The NaN/Inf check every request's FP32 features pass, at memory speed.
#include <cstddef>

namespace dype::rt::daemon {

// Whether the `count` FP32 values at `p` (any alignment) are all finite. Branch-free, since almost
// no request holds a NaN/Inf; built for AVX-512 and AVX2 beside the baseline (SSE2), the CPU's best
// picked at the first call.
bool all_finite_f32(const void* p, std::size_t count);

}  // namespace dype::rt::daemon
