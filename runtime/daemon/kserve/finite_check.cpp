#include "runtime/daemon/kserve/finite_check.h"

#include <cstdint>
#include <cstring>

namespace dype::rt::daemon {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
bool all_finite_f32(const void* p, std::size_t count) {
  constexpr std::uint32_t kExponent = 0x7f800000u;  // all exponent bits set: NaN or Inf
  const auto* bytes = static_cast<const unsigned char*>(p);
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, bytes + i * sizeof bits, sizeof bits);
    any |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
  }
  return any == 0;
}

}  // namespace dype::rt::daemon
