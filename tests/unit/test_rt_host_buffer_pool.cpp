// The receive pool: large buffers reused from one request to the next, pinned once where a GPU
// backend can pin (the pinners here record their calls; the real one is cudaHostRegister, added by
// a GPU device when it is made), bounded by the bytes it keeps, and safe to outlive. The last
// cases check the daemon's receive paths take their large payloads from it: a gRPC request's
// raw_input_contents and an HTTP body then lie in pinned memory, which a GPU uploads by one DMA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define DYPE_TEST_ASAN 1
#include <sanitizer/asan_interface.h>
#endif

#include "hw/pinned_host_memory.h"
#include "../test_host_pinner.h"
#include "runtime/daemon/grpc/grpc_wire.h"
#include "runtime/daemon/http/body_buffer.h"
#include "runtime/daemon/proto/grpc_service.pb.h"
#include "runtime/host_buffer_pool.h"

namespace dype::rt {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

using test::PinnerCalls;
using test::recording_pinner;

bool page_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 4096 == 0; }

TEST(HostBufferPool, PooledCapacityRoundsUpToAnEighthOfThePowerOfTwo) {
  EXPECT_EQ(HostBufferPool::pooled_capacity(1), 4096u);
  EXPECT_EQ(HostBufferPool::pooled_capacity(4 * kMiB), 4 * kMiB) << "a power of two stays";
  EXPECT_EQ(HostBufferPool::pooled_capacity(4 * kMiB + 1), 4 * kMiB + kMiB / 2);
  const std::size_t x = 68471u * 128u * 4u;  // the Debian graph's features: 35,057,152 bytes
  const std::size_t c = HostBufferPool::pooled_capacity(x);
  EXPECT_GE(c, x);
  EXPECT_LE(c, x + x / 8);
  EXPECT_EQ(c % 4096, 0u);
}

TEST(HostBufferPool, SmallBlocksAreNeitherKeptNorPinned) {
  HostBufferPool pool({.min_bytes = kMiB});
  std::size_t cap = 0;
  auto a = pool.acquire(1000, &cap);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(cap, 1000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % 64, 0u);
  a.reset();
  const HostBufferPoolStats s = pool.stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.free_bytes, 0u);
}

TEST(HostBufferPool, ABufferComesBackAndServesTheNextRequestOfItsSize) {
  HostBufferPool pool({.min_bytes = kMiB, .keep_bytes = 64 * kMiB});
  std::size_t cap = 0;
  auto a = pool.acquire(5 * kMiB, &cap);
  std::byte* first = a.get();
  EXPECT_TRUE(page_aligned(first));
  EXPECT_EQ(cap, HostBufferPool::pooled_capacity(5 * kMiB));
  std::memset(first, 7, 5 * kMiB);  // the whole capacity asked for is writable
  a.reset();
  EXPECT_EQ(pool.stats().free_bytes, cap);
#ifdef DYPE_TEST_ASAN
  EXPECT_TRUE(__asan_address_is_poisoned(first + 100)) << "a kept buffer is poisoned until handed out again";
#endif

  auto b = pool.acquire(5 * kMiB - 100);
#ifdef DYPE_TEST_ASAN
  EXPECT_FALSE(__asan_address_is_poisoned(first + 100));
#endif
  EXPECT_EQ(b.get(), first) << "the kept buffer is reused";
  EXPECT_EQ(pool.stats().reused, 1u);
  EXPECT_EQ(pool.stats().allocated, 1u);
  EXPECT_EQ(pool.stats().free_bytes, 0u);

  // While it is held, the next request gets a buffer of its own.
  auto c = pool.acquire(5 * kMiB);
  EXPECT_NE(c.get(), first);
  EXPECT_EQ(pool.stats().allocated, 2u);
}

TEST(HostBufferPool, ASmallRequestDoesNotTakeABufferMoreThanTwiceItsSize) {
  HostBufferPool pool({.min_bytes = kMiB, .keep_bytes = 64 * kMiB});
  std::byte* big = nullptr;
  {
    auto a = pool.acquire(8 * kMiB);
    big = a.get();
  }
  auto small = pool.acquire(3 * kMiB);
  EXPECT_NE(small.get(), big) << "8 MiB kept for a request of 3 MiB";
  auto fits = pool.acquire(7 * kMiB);
  EXPECT_EQ(fits.get(), big);
}

TEST(HostBufferPool, KeepsAtMostKeepBytesGivingUpTheOldestFirst) {
  HostBufferPool pool({.min_bytes = kMiB, .keep_bytes = 10 * kMiB});
  auto a = pool.acquire(4 * kMiB), b = pool.acquire(4 * kMiB), c = pool.acquire(4 * kMiB);
  std::byte* pb = b.get();
  std::byte* pc = c.get();
  a.reset();
  b.reset();
  EXPECT_EQ(pool.stats().free_bytes, 8 * kMiB);
  c.reset();  // 12 MiB free: the oldest (a) is given up
  EXPECT_EQ(pool.stats().free_bytes, 8 * kMiB);
  auto x = pool.acquire(4 * kMiB), y = pool.acquire(4 * kMiB);
  EXPECT_TRUE((x.get() == pb && y.get() == pc) || (x.get() == pc && y.get() == pb));
  EXPECT_EQ(pool.stats().reused, 2u);

  // A buffer larger than everything kept is freed when given back.
  pool.acquire(16 * kMiB).reset();
  EXPECT_EQ(pool.stats().free_bytes, 0u);
  // Lowering the bound gives up what is above it at once; trim gives up everything.
  x.reset();
  y.reset();
  EXPECT_EQ(pool.stats().free_bytes, 8 * kMiB);
  pool.set_keep_bytes(4 * kMiB);
  EXPECT_EQ(pool.stats().free_bytes, 4 * kMiB);
  pool.trim();
  EXPECT_EQ(pool.stats().free_bytes, 0u);
}

TEST(HostBufferPool, ThreadsAcquireAndReturnConcurrently) {
  HostBufferPool pool({.min_bytes = kMiB, .keep_bytes = 16 * kMiB});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 200; ++i) {
        const std::size_t n = kMiB / 2 + rng() % (3 * kMiB);
        auto b = pool.acquire(n);
        b.get()[0] = std::byte{1};
        b.get()[n - 1] = std::byte{2};
      }
    });
  }
  for (auto& t : threads) t.join();
  const HostBufferPoolStats s = pool.stats();
  EXPECT_LE(s.free_bytes, 16 * kMiB);
  EXPECT_GT(s.reused, 0u);
}

// Pinners are added for the whole process and never removed: the cases that add them come last,
// and count the calls they cause (a shuffled or repeated run sees the calls of the cases before).

// The working pinner the cases below share, added once.
PinnerCalls& working_pinner() {
  static PinnerCalls calls;
  static const bool added = [] {
    hw::add_host_pinner(recording_pinner("cuda", calls));
    return true;
  }();
  (void)added;
  return calls;
}
TEST(HostBufferPool, ABufferAGpuCannotPinStillServesAndSaysWhy) {
  if (hw::can_pin_host_memory())
    GTEST_SKIP() << "a case run before in this process added a pinner that works (ctest runs each alone)";
  static PinnerCalls hip;
  hw::add_host_pinner(recording_pinner("hip", hip, /*works=*/false));
  HostBufferPool pool({.min_bytes = kMiB});
  auto a = pool.acquire(2 * kMiB);
  ASSERT_NE(a, nullptr);
  std::memset(a.get(), 3, 2 * kMiB);
  const HostBufferPoolStats s = pool.stats();
  EXPECT_EQ(s.pinned, 0u);
  EXPECT_EQ(s.pin_failed, 1u);
  EXPECT_EQ(s.last_pin_error, "hip: cannot page-lock");
  EXPECT_FALSE(hw::host_memory_pinned(a.get(), 16));
}

TEST(HostBufferPool, PinsEachPooledBufferOnceAndUnpinsItWhenGivenUp) {
  PinnerCalls& cuda = working_pinner();
  const std::size_t pinned0 = cuda.pinned.size(), unpinned0 = cuda.unpinned.size();
  HostBufferPool pool({.min_bytes = kMiB, .keep_bytes = 64 * kMiB});
  const std::size_t n = 68471u * 128u * 4u;
  std::size_t cap = 0;
  auto a = pool.acquire(n, &cap);
  std::byte* p = a.get();
  ASSERT_EQ(cuda.pinned.size(), pinned0 + 1);
  EXPECT_EQ(cuda.pinned.back().first, p);
  EXPECT_EQ(cuda.pinned.back().second, cap) << "the whole buffer, whole pages";
  EXPECT_TRUE(hw::host_memory_pinned(p, n));
  EXPECT_TRUE(hw::host_memory_pinned(p + 1000, 4096)) << "a tensor inside it";
  EXPECT_EQ(pool.stats().pinned_bytes, cap);

  a.reset();
  a = pool.acquire(n);
  EXPECT_EQ(a.get(), p);
  EXPECT_EQ(cuda.pinned.size(), pinned0 + 1) << "reused: not pinned again";
  EXPECT_TRUE(hw::host_memory_pinned(p, n));

  auto small = pool.acquire(4096);
  EXPECT_EQ(cuda.pinned.size(), pinned0 + 1) << "a small block is not pinned";
  EXPECT_FALSE(hw::host_memory_pinned(small.get(), 1));

  a.reset();
  pool.trim();
  ASSERT_EQ(cuda.unpinned.size(), unpinned0 + 1);
  EXPECT_EQ(cuda.unpinned.back(), p);
  EXPECT_FALSE(hw::host_memory_pinned(p, 1));
  EXPECT_EQ(pool.stats().pinned_bytes, 0u);

  HostBufferPool unpinned({.min_bytes = kMiB, .pin = false});
  auto u = unpinned.acquire(2 * kMiB);
  EXPECT_EQ(cuda.pinned.size(), pinned0 + 1) << "a pool told not to pin pins nothing";
  HostBufferPool tight({.min_bytes = kMiB, .keep_bytes = kMiB});
  auto t = tight.acquire(2 * kMiB);
  EXPECT_EQ(cuda.pinned.size(), pinned0 + 1) << "a buffer the pool will not keep is not pinned";
}

TEST(HostBufferPool, AGrpcRequestsRawContentsAndAnHttpBodyArriveInPinnedMemory) {
  working_pinner();
  // A ModelInferRequest with a 4 MB x, serialised by protobuf and cut into 16 KB slices as gRPC
  // hands a received message over.
  inference::ModelInferRequest req;
  req.set_model_name("gcn");
  std::vector<float> x(1 << 20, 0.5f);
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  const std::string wire = req.SerializeAsString();
  std::vector<grpc::Slice> slices;
  for (std::size_t at = 0; at < wire.size(); at += 16384)
    slices.emplace_back(wire.data() + at, std::min<std::size_t>(16384, wire.size() - at));
  grpc::ByteBuffer bytes(slices.data(), slices.size());
  inference::ModelInferRequest header;
  daemon::ReceivedContents raw;
  daemon::parse_infer_request(bytes, header, raw);
  ASSERT_EQ(raw.entries.size(), 1u);
  EXPECT_EQ(std::memcmp(raw.entries[0].data.get(), x.data(), x.size() * 4), 0);
  EXPECT_TRUE(hw::host_memory_pinned(raw.entries[0].data.get(), x.size() * 4))
      << "x as received: a GPU uploads it by one DMA";

  daemon::BodyBuffer body;
  body.reset(x.size() * 4 + 200);
  body.append("{\"header\": 1}", 13);
  body.append(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  EXPECT_TRUE(hw::host_memory_pinned(body.data() + 13, x.size() * 4))
      << "x read in the body where it lies is pinned too";
  daemon::BodyBuffer small;
  small.reset(1000);
  EXPECT_FALSE(hw::host_memory_pinned(small.data(), 1));
}

TEST(HostBufferPool, ABufferOutlivingItsPoolIsUnpinnedAndFreedWhenLetGo) {
  PinnerCalls& outliving = working_pinner();
  const std::size_t pinned0 = outliving.pinned.size(), unpinned0 = outliving.unpinned.size();
  std::shared_ptr<std::byte> held;
  std::byte* p = nullptr;
  {
    HostBufferPool pool({.min_bytes = kMiB});
    held = pool.acquire(2 * kMiB);
    p = held.get();
    std::memset(p, 1, 2 * kMiB);
  }
  ASSERT_EQ(outliving.pinned.size(), pinned0 + 1);
  EXPECT_EQ(outliving.unpinned.size(), unpinned0) << "still held: still pinned";
  EXPECT_TRUE(hw::host_memory_pinned(p, 2 * kMiB));
  held.reset();  // no pool to go back to: unpinned and freed (ASan checks the memory)
  ASSERT_EQ(outliving.unpinned.size(), unpinned0 + 1);
  EXPECT_EQ(outliving.unpinned.back(), p);
  EXPECT_FALSE(hw::host_memory_pinned(p, 1));
}

}  // namespace
}  // namespace dype::rt
