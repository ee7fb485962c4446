#include "runtime/daemon/grpc/worker_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include <spdlog/spdlog.h>

namespace dype::rt::daemon {

WorkerPool::WorkerPool(std::size_t min_threads, std::size_t max_threads, double idle_s)
    : min_threads_(min_threads), max_threads_(std::max<std::size_t>(1, std::max(min_threads, max_threads))), idle_s_(idle_s) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < min_threads_; ++i) {
    std::thread t([this] { work(); });
    threads_.emplace(t.get_id(), std::move(t));
  }
}

WorkerPool::~WorkerPool() {
  std::vector<std::thread> all;
  {
    std::unique_lock lock(mu_);
    stopping_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return exited_.size() == threads_.size(); });
    for (auto& [id, t] : threads_) all.push_back(std::move(t));
    threads_.clear();
    exited_.clear();
  }
  for (std::thread& t : all) t.join();
}

void WorkerPool::join_exited_locked(std::vector<std::thread>& out) {
  for (const std::thread::id id : exited_) {
    auto it = threads_.find(id);
    out.push_back(std::move(it->second));
    threads_.erase(it);
  }
  exited_.clear();
}

void WorkerPool::post(std::function<void()> task) {
  std::vector<std::thread> exited;
  {
    std::lock_guard lock(mu_);
    join_exited_locked(exited);
    tasks_.push_back(std::move(task));
    // More tasks waiting than idle threads to take them: one more thread, up to the bound.
    if (tasks_.size() > idle_ && threads_.size() < max_threads_ && !stopping_) {
      std::thread t([this] { work(); });
      threads_.emplace(t.get_id(), std::move(t));
    } else {
      cv_.notify_one();
    }
  }
  for (std::thread& t : exited) t.join();
}

std::size_t WorkerPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_.size() - exited_.size();
}

void WorkerPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    bool leave = false;
    while (tasks_.empty() && !leave) {
      if (stopping_) {
        leave = true;
        break;
      }
      ++idle_;
      const bool woken = cv_.wait_for(lock, std::chrono::duration<double>(idle_s_), [this] { return !tasks_.empty() || stopping_; });
      --idle_;
      if (!woken && threads_.size() - exited_.size() > min_threads_) leave = true;
    }
    if (leave) break;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("worker pool task: {}", e.what());
    } catch (...) {
      spdlog::error("worker pool task: unknown exception");
    }
    task = nullptr;
    lock.lock();
  }
  exited_.push_back(std::this_thread::get_id());
  cv_.notify_all();
}

}  // namespace dype::rt::daemon
