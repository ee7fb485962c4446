#pragma once
// The NaN/Inf check every request's FP32 features pass, at memory speed.
#include <cstddef>

namespace dype::rt::daemon {

// Whether the `count` FP32 values at `p` (any alignment) are all finite. Branch-free, since almost
// no request holds a NaN/Inf; AVX2 where the CPU has it (picked at the first call), else the
// baseline (SSE2).
bool all_finite_f32(const void* p, std::size_t count);

// Copies the `count` FP32 values at `src` to `dst` (any alignment) and says whether they are all
// finite, checked in registers on the way. With AVX2 and `dst` 4-byte aligned, the stores bypass the
// cache (non-temporal, fenced before returning): a payload copied once out of a transport's buffers
// then costs no read-for-ownership of its destination's lines. Elsewhere, memcpy then
// all_finite_f32.
bool copy_all_finite_f32(void* dst, const void* src, std::size_t count);

}  // namespace dype::rt::daemon
