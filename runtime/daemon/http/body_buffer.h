#pragma once
// BodyBuffer: the buffer a request body is received into, reused through a BodyPool: a fresh
// buffer for every body page-faults on each 4 KiB page the kernel copies into (measured: most of
// the receive time for a 400 KB body). Buffers above kKeepBodyBytes, and those whose memory came
// from the process's receive pool (1 MiB or more, pinned where a GPU can pin them:
// runtime/host_buffer_pool.h), are given up when given back, their memory to that pool; the
// BodyPool keeps a bounded number of the rest, so idle connections hold little. Not a std::string: growing one
// zero-fills the bytes the socket is about to overwrite (measured ~40 us per 400 KB body).
//
//   std::shared_ptr<BodyBuffer> b = pool.acquire();
//   b->reset(length + 64);  b->extend_to(pad);  b->append(data, n);   ... b->data(), b->size() ...
//   pool.release(std::move(b));
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/host_buffer_pool.h"

namespace dype::rt::daemon {

constexpr std::size_t kKeepBodyBytes = 4u << 20;  // x the pool's count: at most 128 MiB kept
// Room the transport leaves after every body, readable: simdjson parses a JSON text in place when
// 64 bytes past its end may be read (tensor.h, kJsonReadPaddingBytes), else from a copy.
constexpr std::size_t kBodyPaddingBytes = 64;

class BodyBuffer {
 public:
  BodyBuffer() = default;
  BodyBuffer(BodyBuffer&&) = default;
  BodyBuffer& operator=(BodyBuffer&&) = default;
  BodyBuffer(const BodyBuffer&) = delete;  // two would write into one memory
  BodyBuffer& operator=(const BodyBuffer&) = delete;

  // Empty, with room for n bytes without reallocating.
  void reset(std::size_t n) {
    size_ = 0;
    if (n > capacity_) reallocate(n);
  }
  void append(const char* p, std::size_t n) {
    if (size_ + n > capacity_) reallocate(std::max(size_ + n, 2 * capacity_));
    std::memcpy(data_.get() + size_, p, n);
    size_ += n;
  }
  // Grows the size to n; the new bytes are the caller's to fill.
  void extend_to(std::size_t n) {
    if (n > capacity_) reallocate(n);
    size_ = n;
  }
  void release_if_above(std::size_t keep) {
    if (capacity_ > keep) *this = BodyBuffer{};
  }
  char* data() { return reinterpret_cast<char*>(data_.get()); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void reallocate(std::size_t n) {
    std::size_t capacity = 0;
    std::shared_ptr<std::byte> d = receive_buffers().acquire(n, &capacity);  // not zeroed
    if (size_ > 0) std::memcpy(d.get(), data_.get(), size_);
    data_ = std::move(d);
    capacity_ = capacity;
  }
  std::shared_ptr<std::byte> data_;
  std::size_t size_ = 0, capacity_ = 0;
};

// Buffers handed out to requests and taken back (thread-safe). Keeps at most `keep` free ones. A
// buffer someone else still holds when it is given back (a request whose engine reads a tensor in
// the body where it lies, HttpRequest::body_owner) is left to them: the last holder frees it.
class BodyPool {
 public:
  explicit BodyPool(std::size_t keep = 32) : keep_(keep) {}
  std::shared_ptr<BodyBuffer> acquire() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return std::make_shared<BodyBuffer>();
    std::shared_ptr<BodyBuffer> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void release(std::shared_ptr<BodyBuffer> b) {
    if (!b || b.use_count() > 1) return;
    // Memory from the receive pool goes back there, where it is counted, bounded and trimmed
    // (and pinned once for a GPU): only smaller buffers stay with the connection.
    b->release_if_above(std::min(kKeepBodyBytes, receive_buffers().options().min_bytes - 1));
    std::lock_guard lock(mutex_);
    if (free_.size() < keep_) free_.push_back(std::move(b));
  }
  std::size_t free_count() const {
    std::lock_guard lock(mutex_);
    return free_.size();
  }

 private:
  std::size_t keep_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<BodyBuffer>> free_;
};

}  // namespace dype::rt::daemon
