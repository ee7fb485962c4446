// The NaN/Inf check and its copying form, against std::isfinite and memcpy: every alignment of the
// destination and source the vector code can meet, lengths around each vector's width and a cache
// line, a non-finite value at every position (the head before the aligned stores, the streamed
// body, the tail), and both signs of Inf and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/daemon/kserve/finite_check.h"

namespace dype::rt::daemon {
namespace {

std::vector<float> values(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.37f - 11.0f;
  return v;
}

bool reference_finite(const std::vector<float>& v) {
  for (float f : v)
    if (!std::isfinite(f)) return false;
  return true;
}

// `v` written at byte offset `misalign` of a buffer (so the source has any alignment).
std::vector<unsigned char> placed(const std::vector<float>& v, std::size_t misalign) {
  std::vector<unsigned char> b(misalign + v.size() * 4 + 64);
  if (!v.empty()) std::memcpy(b.data() + misalign, v.data(), v.size() * 4);
  return b;
}

const float kBad[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN(),
                      -std::numeric_limits<float>::signaling_NaN()};

TEST(DaemonFiniteCheck, CopyingCheckCopiesEveryByteAtEveryAlignment) {
  for (std::size_t n : {0u, 1u, 3u, 7u, 8u, 15u, 16u, 17u, 31u, 32u, 33u, 63u, 64u, 65u, 1000u}) {
    const std::vector<float> v = values(n);
    for (std::size_t src_at = 0; src_at < 8; ++src_at)
      for (std::size_t dst_at = 0; dst_at < 68; dst_at += dst_at < 8 ? 1 : 4) {
        const std::vector<unsigned char> src = placed(v, src_at);
        std::vector<unsigned char> dst(dst_at + n * 4 + 64, 0xa5);
        EXPECT_TRUE(all_finite_f32(src.data() + src_at, n)) << n << " values, source +" << src_at;
        EXPECT_TRUE(copy_all_finite_f32(dst.data() + dst_at, src.data() + src_at, n));
        EXPECT_TRUE(n == 0 || std::memcmp(dst.data() + dst_at, v.data(), n * 4) == 0)
            << n << " values, destination +" << dst_at << ", source +" << src_at;
        for (std::size_t i = 0; i < dst_at; ++i) ASSERT_EQ(dst[i], 0xa5) << "written before";
        for (std::size_t i = dst_at + n * 4; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xa5) << "past";
      }
  }
}

TEST(DaemonFiniteCheck, NonFiniteValuesAreFoundAtEveryPosition) {
  for (std::size_t n : {1u, 9u, 40u, 130u}) {
    for (std::size_t bad = 0; bad < n; ++bad)
      for (float b : kBad)
        for (std::size_t dst_at : {0u, 4u, 12u, 28u, 60u}) {
          std::vector<float> v = values(n);
          v[bad] = b;
          ASSERT_FALSE(reference_finite(v));
          EXPECT_FALSE(all_finite_f32(v.data(), n)) << n << " values, bad at " << bad;
          const std::vector<unsigned char> src = placed(v, 1);
          EXPECT_FALSE(all_finite_f32(src.data() + 1, n)) << n << " values, bad at " << bad << ", source +1";
          std::vector<unsigned char> dst(dst_at + n * 4 + 64);
          EXPECT_FALSE(copy_all_finite_f32(dst.data() + dst_at, src.data() + 1, n))
              << n << " values, bad at " << bad << ", destination +" << dst_at;
          EXPECT_EQ(std::memcmp(dst.data() + dst_at, v.data(), n * 4), 0) << "copied all the same";
        }
  }
  // The largest finite values and the smallest subnormals are finite.
  std::vector<float> edge = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::denorm_min(), -0.0f};
  edge.resize(70, std::numeric_limits<float>::lowest());
  std::vector<float> out(edge.size());
  EXPECT_TRUE(all_finite_f32(edge.data(), edge.size()));
  EXPECT_TRUE(copy_all_finite_f32(out.data(), edge.data(), edge.size()));
}

}  // namespace
}  // namespace dype::rt::daemon
