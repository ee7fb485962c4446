#include "runtime/daemon/kserve/finite_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace dype::rt::daemon {
namespace {

// Branch-free (integer compares and ORs), so the compiler may vectorise it: the baseline and the
// AVX2 scan's tail.
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
// Written out, not left to the vectoriser: GCC 12 at -O2 (the dev and sanitizer presets) keeps the
// loop above scalar, 4-5x slower over a 35 MB x; at -O3 this matches its AVX-512 build, the
// scan being bound by memory.
[[gnu::target("avx2")]] bool scan_avx2(const unsigned char* b, std::size_t n) {
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i bad = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)  // two cache lines per step
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i * 4 + k * 32));
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(v, exponent), exponent));
    }
  return _mm256_testz_si256(bad, bad) != 0 && scan(b + i * 4, n - i);
}

Scan pick() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? scan_avx2 : scan_baseline;
}
#else
Scan pick() { return scan_baseline; }
#endif

using CopyScan = bool (*)(unsigned char*, const unsigned char*, std::size_t);

bool copy_scan_baseline(unsigned char* d, const unsigned char* s, std::size_t n) {
  if (n == 0) return true;
  std::memcpy(d, s, n * 4);
  return all_finite_f32(d, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
// Streaming stores need a destination aligned to the vector: the values before that boundary (at
// most one vector's worth) and the tail are copied and checked as usual. AVX2 only (x86-64 CPUs
// since 2013); older ones take the baseline.
std::size_t head_to_alignment(unsigned char* d, std::size_t n, std::size_t vector) {
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(d) % vector;
  return misaligned == 0 ? 0 : std::min(n, (vector - misaligned) / 4);
}

[[gnu::target("avx2")]] bool copy_scan_avx2(unsigned char* d, const unsigned char* s, std::size_t n) {
  const std::size_t head = head_to_alignment(d, n, 32);
  bool ok = copy_scan_baseline(d, s, head);
  d += head * 4;
  s += head * 4;
  n -= head;
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i bad = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {  // two cache lines per step
    __m256i v[4];
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i * 4 + k * 32));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i * 4 + k * 32), v[k]);
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(v[k], exponent), exponent));
    }
  }
  _mm_sfence();
  ok &= _mm256_testz_si256(bad, bad) != 0;
  return copy_scan_baseline(d + i * 4, s + i * 4, n - i) && ok;
}

CopyScan pick_copy() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? copy_scan_avx2 : copy_scan_baseline;
}
#else
CopyScan pick_copy() { return copy_scan_baseline; }
#endif

}  // namespace

bool all_finite_f32(const void* p, std::size_t count) {
  static const Scan chosen = pick();
  return chosen(static_cast<const unsigned char*>(p), count);
}

bool copy_all_finite_f32(void* dst, const void* src, std::size_t count) {
  static const CopyScan chosen = pick_copy();
  if (reinterpret_cast<std::uintptr_t>(dst) % 4 != 0)  // no whole value reaches an aligned vector
    return copy_scan_baseline(static_cast<unsigned char*>(dst),
                              static_cast<const unsigned char*>(src), count);
  return chosen(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), count);
}

}  // namespace dype::rt::daemon
