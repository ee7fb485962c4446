#include "runtime/daemon/kserve/finite_check.h"

#include <cstdint>
#include <cstring>

namespace dype::rt::daemon {
namespace {

// Branch-free (integer compares and ORs), so the compiler vectorises it for whatever target the
// caller is built for.
[[gnu::always_inline]] inline bool scan(const unsigned char* bytes, std::size_t count) {
  constexpr std::uint32_t kExponent = 0x7f800000u;  // all exponent bits set: NaN or Inf
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, bytes + i * sizeof bits, sizeof bits);
    any |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
  }
  return any == 0;
}

using Scan = bool (*)(const unsigned char*, std::size_t);

bool scan_baseline(const unsigned char* b, std::size_t n) { return scan(b, n); }

#if defined(__x86_64__) && defined(__GNUC__)
// Picked at the first call, not by an ifunc resolver: a resolver runs before sanitizer runtimes
// are up (TSan crashes in it).
[[gnu::target("avx2")]] bool scan_avx2(const unsigned char* b, std::size_t n) { return scan(b, n); }
[[gnu::target("avx512f")]] bool scan_avx512(const unsigned char* b, std::size_t n) { return scan(b, n); }

Scan pick() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return scan_avx512;
  if (__builtin_cpu_supports("avx2")) return scan_avx2;
  return scan_baseline;
}
#else
Scan pick() { return scan_baseline; }
#endif

}  // namespace

bool all_finite_f32(const void* p, std::size_t count) {
  static const Scan chosen = pick();
  return chosen(static_cast<const unsigned char*>(p), count);
}

}  // namespace dype::rt::daemon
