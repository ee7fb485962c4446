// Pinned host ranges: which backends pinned a range, lookups inside and across its ends, and
// unpinning when the last holder lets go. The pinners here record their calls; the real ones are
// cudaHostRegister / hipHostRegister, added by a GPU device when it is made (run by the GPU check).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hw/pinned_host_memory.h"
#include "../test_host_pinner.h"

namespace dype::hw {
namespace {

using test::PinnerCalls;
using test::recording_pinner;

TEST(PinnedHostMemory, PinsWithEveryBackendThatCanAndUnpinsWhenReleased) {
  std::vector<char> region(4096), other(4096);
  std::string why;
  // No GPU backend has made a device yet: nothing to pin with, and nothing is pinned.
  EXPECT_EQ(pin_host_memory(region.data(), region.size(), &why), nullptr);
  EXPECT_EQ(why, "no GPU backend has a device in this process");
  EXPECT_FALSE(host_memory_pinned(region.data(), 1));
  EXPECT_FALSE(can_pin_host_memory());

  // A backend that cannot pin: nothing pinned, and its error says why.
  static PinnerCalls cuda, hip, cuda_again;
  add_host_pinner(recording_pinner("hip", hip, /*works=*/false));
  EXPECT_TRUE(can_pin_host_memory()) << "a pinner is there, whether or not it can pin";
  EXPECT_EQ(pin_host_memory(region.data(), region.size(), &why), nullptr);
  EXPECT_EQ(why, "hip: cannot page-lock");
  add_host_pinner(recording_pinner("cuda", cuda));
  EXPECT_EQ(pin_host_memory(region.data(), 0, &why), nullptr);
  EXPECT_EQ(why, "empty range");
  add_host_pinner(recording_pinner("cuda", cuda_again));  // one pinner per backend
  auto pin = pin_host_memory(region.data(), region.size(), &why);
  ASSERT_NE(pin, nullptr) << why;
  EXPECT_EQ(pin->backends(), "cuda") << "hip could not, and is not counted";
  ASSERT_EQ(cuda.pinned.size(), 1u);
  EXPECT_EQ(cuda.pinned[0].first, region.data());
  EXPECT_EQ(cuda.pinned[0].second, region.size());
  EXPECT_TRUE(cuda_again.pinned.empty());

  EXPECT_TRUE(host_memory_pinned(region.data(), region.size()));
  EXPECT_TRUE(host_memory_pinned(region.data() + 100, 200));
  EXPECT_FALSE(host_memory_pinned(region.data() + 100, region.size())) << "runs past the end";
  EXPECT_FALSE(host_memory_pinned(region.data() - 1, 2)) << "starts before it";
  EXPECT_FALSE(host_memory_pinned(other.data(), 16));

  auto pin2 = pin_host_memory(other.data(), other.size());
  ASSERT_NE(pin2, nullptr);
  EXPECT_TRUE(host_memory_pinned(other.data() + 8, 8));
  pin.reset();
  ASSERT_EQ(cuda.unpinned.size(), 1u);
  EXPECT_EQ(cuda.unpinned[0], region.data());
  EXPECT_FALSE(host_memory_pinned(region.data(), 1));
  EXPECT_TRUE(host_memory_pinned(other.data(), 1)) << "the other range stays pinned";
  pin2.reset();
  EXPECT_FALSE(host_memory_pinned(other.data(), 1));
  EXPECT_TRUE(hip.unpinned.empty()) << "never pinned by hip, never unpinned by it";
}

}  // namespace
}  // namespace dype::hw
