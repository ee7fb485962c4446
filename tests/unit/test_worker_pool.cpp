// WorkerPool (runtime/daemon/grpc/worker_pool.h): every task posted runs once; threads grow while tasks
// block, never beyond the bound, and idle ones leave down to the minimum; the destructor runs
// what was posted.
#include <atomic>
#include <chrono>
#include <latch>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/daemon/grpc/worker_pool.h"

using dype::rt::daemon::WorkerPool;

TEST(WorkerPool, GrowsToTheBoundWhileTasksBlockThenShrinks) {
  WorkerPool pool(1, 4, 0.05);
  EXPECT_EQ(pool.threads(), 1u);
  std::latch release(1);
  std::atomic<int> started{0}, done{0};
  for (int i = 0; i < 10; ++i)
    pool.post([&] {
      ++started;
      release.wait();
      ++done;
    });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (started.load() < 4 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(started.load(), 4);  // four threads, all blocked; six tasks wait
  EXPECT_EQ(pool.threads(), 4u);
  release.count_down();
  while (done.load() < 10 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(done.load(), 10);
  while (pool.threads() > 1 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pool.threads(), 1u);
  std::atomic<int> later{0};
  pool.post([&] { ++later; });  // joins the threads that left, and still runs tasks
  while (later.load() < 1 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(later.load(), 1);
}

TEST(WorkerPool, DestructorRunsWhatWasPosted) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(0, 2);
    for (int i = 0; i < 100; ++i) pool.post([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(WorkerPool, AThrowingTaskDoesNotStopThePool) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(1, 1);
    pool.post([] { throw std::runtime_error("boom"); });
    pool.post([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 1);
}
