#pragma once
// Run-time instruction-set selection. Kernels are compiled in scalar, AVX2 and AVX-512 variants
// (files *_avx2.cpp / *_avx512.cpp) and dispatch on active_isa(), so one binary runs everywhere.
#include <string_view>

namespace dype::kernels::cpu {

enum class Isa { scalar, avx2, avx512 };

std::string_view to_string(Isa isa);
// What this CPU supports (AVX-512 means F+BW+VL+DQ; AVX2 means AVX2+FMA).
Isa detected_isa();
// What kernels use: detected_isa(), unless lowered by force_isa() or DYPE_ISA=scalar|avx2|avx512.
Isa active_isa();
// Lowers the ISA kernels use (tests run every variant this way). Asking for more than the CPU
// supports is clamped to detected_isa().
void force_isa(Isa isa);
// Sets the active ISA from DYPE_ISA again (as at start-up; detected_isa() when unset). Throws
// InputError naming DYPE_ISA for a value other than scalar, avx2 or avx512.
void reload_isa_from_env();

}  // namespace dype::kernels::cpu
