#pragma once
// BodyBuffer: the receive buffer an HTTP worker thread keeps between requests (one per thread,
// worker_body_buffer()). A fresh buffer for every body page-faults on each 4 KiB page the kernel
// copies into (measured: most of the receive time for a 400 KB body). Above kKeepBodyBytes it is
// freed after the request so idle threads hold little memory. Not a std::string: growing one
// zero-fills the bytes the socket is about to overwrite (measured ~40 us per 400 KB body).
//
//   BodyBuffer& b = worker_body_buffer();
//   b.reset(length + 64);  b.extend_to(pad);  b.append(data, n);   ... use b.data(), b.size() ...
//   b.release_if_above(kKeepBodyBytes);
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

namespace dype::rt::daemon {

constexpr std::size_t kKeepBodyBytes = 4u << 20;  // x 32 worker threads: at most 128 MiB kept

class BodyBuffer {
 public:
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
  char* data() { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  void reallocate(std::size_t n) {
    std::unique_ptr<char[]> d(new char[n]);  // default-initialised: not zeroed
    if (size_ > 0) std::memcpy(d.get(), data_.get(), size_);
    data_ = std::move(d);
    capacity_ = n;
  }
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0, capacity_ = 0;
};

// The calling thread's buffer (kept for the thread's life).
inline BodyBuffer& worker_body_buffer() {
  thread_local BodyBuffer buffer;
  return buffer;
}

}  // namespace dype::rt::daemon
