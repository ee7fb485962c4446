#include "kernels/cpu/isa.h"

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

// XCR0 via xgetbv: the OS must save the wide registers on context switch, or using them faults
// (or silently corrupts state), whatever cpuid says. Inline asm keeps this file baseline x86-64.
std::uint64_t read_xcr0() {
  std::uint32_t eax = 0;
  std::uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

Isa probe_cpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return Isa::scalar;
  const bool osxsave = (ecx >> 27) & 1U;
  const bool avx = (ecx >> 28) & 1U;
  const bool fma = (ecx >> 12) & 1U;
  if (!osxsave || !avx) return Isa::scalar;
  const std::uint64_t xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6U) == 0x6U;     // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xE6U) == 0xE6U;   // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_ymm) return Isa::scalar;
  if (__get_cpuid_max(0, nullptr) < 7) return Isa::scalar;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = (ebx >> 5) & 1U;
  const bool avx512f = (ebx >> 16) & 1U;
  const bool avx512dq = (ebx >> 17) & 1U;
  const bool avx512bw = (ebx >> 30) & 1U;
  const bool avx512vl = (ebx >> 31) & 1U;
  if (avx2 && fma && os_zmm && avx512f && avx512dq && avx512bw && avx512vl) return Isa::avx512;
  if (avx2 && fma) return Isa::avx2;
  return Isa::scalar;
}

Isa clamp(Isa wanted) {
  const Isa cap = detected_isa();
  return static_cast<int>(wanted) > static_cast<int>(cap) ? cap : wanted;
}

Isa initial_isa() {
  const char* env = std::getenv("DYPE_ISA");
  if (env == nullptr || *env == '\0') return detected_isa();
  const std::string value(env);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (value == to_string(isa)) return clamp(isa);
  }
  throw InputError("DYPE_ISA", "'" + value + "' is not one of scalar, avx2, avx512");
}

// -1 = not yet initialised from the environment; otherwise an Isa value.
std::atomic<int> g_active{-1};

}  // namespace

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

Isa detected_isa() {
  static const Isa detected = probe_cpu();
  return detected;
}

Isa active_isa() {
  int value = g_active.load(std::memory_order_relaxed);
  if (value < 0) {
    const int initial = static_cast<int>(initial_isa());
    // A concurrent force_isa() wins over the environment default.
    int expected = -1;
    g_active.compare_exchange_strong(expected, initial, std::memory_order_relaxed);
    value = g_active.load(std::memory_order_relaxed);
  }
  return static_cast<Isa>(value);
}

void force_isa(Isa isa) { g_active.store(static_cast<int>(clamp(isa)), std::memory_order_relaxed); }

void reload_isa_from_env() {
  g_active.store(static_cast<int>(initial_isa()), std::memory_order_relaxed);
}

}  // namespace dype::kernels::cpu
