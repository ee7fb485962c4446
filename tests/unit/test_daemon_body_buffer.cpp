// The HTTP workers' receive buffer (runtime/daemon/http/body_buffer.h): kept between requests, grows
// without losing what it holds, freed above the keep limit, one per thread.
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/daemon/http/body_buffer.h"
#include "runtime/host_buffer_pool.h"

using namespace dype::rt::daemon;

namespace {
std::string_view text(BodyBuffer& b) { return {b.data(), b.size()}; }
}  // namespace

TEST(DaemonBodyBuffer, AppendGrowsAndKeepsContents) {
  BodyBuffer b;
  b.reset(4);
  b.append("abcd", 4);
  const std::string more(1000, 'x');
  b.append(more.data(), more.size());
  EXPECT_EQ(b.size(), 1004u);
  EXPECT_EQ(text(b).substr(0, 5), "abcdx");
  EXPECT_EQ(text(b).substr(1003), "x");
}

TEST(DaemonBodyBuffer, ResetEmptiesButKeepsTheMemory) {
  BodyBuffer b;
  b.reset(256);
  const char* before = b.data();
  b.append("hello", 5);
  b.reset(128);  // smaller than what it has: no reallocation
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), before);
}

TEST(DaemonBodyBuffer, ExtendToKeepsThePrefixForTheCallerToFillAfter) {
  BodyBuffer b;
  b.reset(2);
  b.append("ab", 2);
  b.extend_to(64);
  EXPECT_EQ(b.size(), 64u);
  EXPECT_EQ(text(b).substr(0, 2), "ab");
}

TEST(DaemonBodyBuffer, ReleasedOnlyAboveTheKeepLimit) {
  BodyBuffer b;
  b.reset(1024);
  b.release_if_above(4096);
  EXPECT_NE(b.data(), nullptr);
  b.release_if_above(512);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

TEST(DaemonBodyBuffer, PoolReusesBuffersAndKeepsABoundedNumber) {
  BodyPool pool(2);
  std::shared_ptr<BodyBuffer> a = pool.acquire(), b = pool.acquire(), c = pool.acquire();
  a->reset(1024);
  const char* a_data = a->data();
  pool.release(std::move(a));
  pool.release(std::move(b));
  pool.release(std::move(c));  // beyond the 2 kept: freed
  EXPECT_EQ(pool.free_count(), 2u);
  std::shared_ptr<BodyBuffer> again = pool.acquire(), first = pool.acquire();
  EXPECT_EQ(first->data(), a_data);  // the buffer given back first, still allocated
  EXPECT_EQ(pool.free_count(), 0u);
  // Above kKeepBodyBytes a buffer is freed before it is kept.
  first->reset(kKeepBodyBytes + 1);
  pool.release(std::move(first));
  EXPECT_EQ(pool.acquire()->data(), nullptr);
}

// A buffer a request still reads (the body's tensors used where they lie) is not taken back into
// the pool: the connection gets another, and the request's hold keeps the bytes until it lets go.
TEST(DaemonBodyBuffer, PoolLeavesABufferSomeoneStillHolds) {
  BodyPool pool(2);
  std::shared_ptr<BodyBuffer> b = pool.acquire();
  b->reset(1024);
  b->append("abc", 3);
  const BodyBuffer* first = b.get();
  std::shared_ptr<const void> held(b, b->data());
  pool.release(std::move(b));
  EXPECT_EQ(pool.free_count(), 0u);
  EXPECT_EQ(std::string_view(static_cast<const char*>(held.get()), 3), "abc");
  EXPECT_NE(pool.acquire().get(), first);
  // Given back with no one else holding it, a buffer is pooled as before.
  std::shared_ptr<BodyBuffer> c = pool.acquire();
  const BodyBuffer* second = c.get();
  pool.release(std::move(c));
  EXPECT_EQ(pool.acquire().get(), second);
}

// A body of 1 MiB or more lies in memory of the receive pool (kept, pinned for a GPU where one can
// pin it): given back, that memory goes to the receive pool, where it is counted and trimmed, not
// to the connection's BodyPool.
TEST(DaemonBodyBuffer, ReceivePoolMemoryGoesBackToTheReceivePool) {
  dype::rt::HostBufferPool& receive = dype::rt::receive_buffers();
  receive.trim();
  BodyPool pool(4);
  std::shared_ptr<BodyBuffer> big = pool.acquire(), small = pool.acquire();
  big->reset(2u << 20);
  small->reset(64u << 10);
  const char* big_data = big->data();
  const std::size_t big_capacity = big->capacity();
  pool.release(std::move(big));
  pool.release(std::move(small));
  EXPECT_EQ(pool.free_count(), 2u);
  EXPECT_EQ(receive.stats().free_bytes, big_capacity) << "the 2 MiB body's memory is the receive pool's again";
  std::shared_ptr<BodyBuffer> a = pool.acquire(), b = pool.acquire();
  EXPECT_TRUE(a->data() == nullptr || b->data() == nullptr) << "the big one came back empty";
  EXPECT_TRUE(a->capacity() == (64u << 10) || b->capacity() == (64u << 10)) << "the small one kept its memory";
  BodyBuffer again;
  again.reset(2u << 20);
  EXPECT_EQ(again.data(), big_data) << "the next large body reuses it from the receive pool";
}
