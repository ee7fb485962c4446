#pragma once
// WorkerPool: a bounded, elastic pool of threads for front-end work that may block (parsing and
// submitting to the engine, which waits for room; waiting on the engine's std::future answers),
// so that gRPC's callback threads never block. It keeps `min_threads` threads, starts another
// (up to `max_threads`) when a task is posted while every thread is busy, and lets a thread that
// has been idle for `idle_s` exit (down to min_threads). Tasks run in the order posted; beyond
// max_threads busy, they wait in the queue.
//
//   WorkerPool pool(2, 64);
//   pool.post([&] { auto y = future.get(); reactor->Finish(...); });
//
// The destructor runs the tasks already posted, then joins every thread.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dype::rt::daemon {

class WorkerPool {
 public:
  WorkerPool(std::size_t min_threads, std::size_t max_threads, double idle_s = 10.0);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> task);
  // Threads alive now (for tests and metrics).
  std::size_t threads() const;

 private:
  void work();
  void join_exited_locked(std::vector<std::thread>& out);

  const std::size_t min_threads_, max_threads_;
  const double idle_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::unordered_map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> exited_;  // threads that left work(), joined by the next post or the destructor
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace dype::rt::daemon
