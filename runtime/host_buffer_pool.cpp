#include "runtime/host_buffer_pool.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <vector>

#include "hw/pinned_host_memory.h"

// Under AddressSanitizer a kept buffer is poisoned while it waits in the pool, so a view of an
// earlier request's payload that outlived it is still reported, as a use after free would be.
#if defined(__SANITIZE_ADDRESS__)
#define DYPE_POOL_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DYPE_POOL_POISONS 1
#endif
#endif
#ifdef DYPE_POOL_POISONS
#include <sanitizer/asan_interface.h>
#endif

namespace dype::rt {
namespace {

constexpr std::size_t kSmallAlign = 64;

// The host's page size: a pooled buffer is a whole number of its pages, so pinning one locks no
// page another buffer shares (64 KiB pages on some aarch64 hosts).
std::size_t page_bytes() {
  static const std::size_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  return page;
}

void poison(const void* p, std::size_t n) {
#ifdef DYPE_POOL_POISONS
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)p;
  (void)n;
#endif
}

void unpoison(const void* p, std::size_t n) {
#ifdef DYPE_POOL_POISONS
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p;
  (void)n;
#endif
}

std::byte* allocate(std::size_t align, std::size_t bytes) {
  void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return static_cast<std::byte*>(p);
}

}  // namespace

// A pooled buffer: page aligned and a whole number of pages, so pinning it locks no page that
// another buffer shares.
struct Block {
  std::byte* data = nullptr;
  std::size_t capacity = 0;
  std::unique_ptr<hw::PinnedHostMemory> pin;
  ~Block() {
    pin.reset();  // unpinned before the memory goes back to the heap
    unpoison(data, capacity);
    std::free(data);
  }
};

struct HostBufferPool::State {
  mutable std::mutex mu;
  HostBufferPoolOptions options;
  std::vector<std::unique_ptr<Block>> free;  // least recently returned first
  HostBufferPoolStats stats;

  // Takes back a buffer its last holder let go: kept, or freed when the pool keeps too much. Runs
  // in a shared_ptr's deleter, so it never throws: a buffer that cannot be kept is freed.
  void give_back(std::unique_ptr<Block> b) noexcept {
    std::vector<std::unique_ptr<Block>> gone;  // freed (and unpinned) outside the lock
    std::unique_ptr<Block> dropped;
    {
      std::lock_guard lock(mu);
      if (b->capacity > options.keep_bytes) {
        dropped = std::move(b);
      } else {
        try {
          free.push_back(std::move(b));  // strong guarantee: on a throw, b is still ours
        } catch (...) {
          dropped = std::move(b);
        }
        if (!dropped) {
          stats.free_bytes += free.back()->capacity;
          poison(free.back()->data, free.back()->capacity);
          shrink_to(options.keep_bytes, gone);
        }
      }
      if (dropped && dropped->pin) stats.pinned_bytes -= dropped->capacity;
    }
  }
  // Under the lock: moves the oldest free buffers into `gone` until at most `keep` bytes are free,
  // counting them out of the free and pinned bytes. When `gone` cannot grow (out of memory),
  // nothing is given up this time.
  void shrink_to(std::size_t keep, std::vector<std::unique_ptr<Block>>& gone) noexcept {
    std::size_t drop = 0, dropped_bytes = 0;
    while (drop < free.size() && stats.free_bytes - dropped_bytes > keep) dropped_bytes += free[drop++]->capacity;
    if (drop == 0) return;
    try {
      gone.reserve(gone.size() + drop);
    } catch (...) {
      return;
    }
    for (std::size_t i = 0; i < drop; ++i) {
      if (free[i]->pin) stats.pinned_bytes -= free[i]->capacity;
      gone.push_back(std::move(free[i]));
    }
    free.erase(free.begin(), free.begin() + static_cast<std::ptrdiff_t>(drop));
    stats.free_bytes -= dropped_bytes;
  }
};

namespace {

// Returns a pooled buffer to its pool when the last holder lets go, or frees it when the pool is
// gone.
struct GiveBack {
  std::weak_ptr<HostBufferPool::State> state;
  Block* block;
  void operator()(std::byte*) const {
    std::unique_ptr<Block> b(block);
    if (auto s = state.lock()) s->give_back(std::move(b));
  }
};

}  // namespace

HostBufferPool::HostBufferPool(HostBufferPoolOptions options) : state_(std::make_shared<State>()) {
  state_->options = options;
}

HostBufferPool::~HostBufferPool() = default;

std::size_t HostBufferPool::pooled_capacity(std::size_t n) {
  const std::size_t granule = std::max(page_bytes(), std::bit_floor(std::max<std::size_t>(n, 1)) / 8);
  return (n + granule - 1) / granule * granule;
}

std::shared_ptr<std::byte> HostBufferPool::acquire(std::size_t n, std::size_t* capacity) {
  n = std::max<std::size_t>(n, 1);
  if (n > std::numeric_limits<std::size_t>::max() / 2) throw std::bad_alloc();  // rounding would wrap
  HostBufferPoolOptions options;
  std::unique_ptr<Block> kept;
  {
    std::lock_guard lock(state_->mu);
    options = state_->options;
    if (n >= options.min_bytes) {
      // The smallest kept buffer that fits and is not more than twice the size wanted (a small
      // request does not take a large pinned buffer another would reuse).
      std::size_t best = state_->free.size();
      for (std::size_t i = 0; i < state_->free.size(); ++i) {
        const std::size_t c = state_->free[i]->capacity;
        if (c >= n && c / 2 <= n && (best == state_->free.size() || c < state_->free[best]->capacity))
          best = i;
      }
      if (best < state_->free.size()) {
        kept = std::move(state_->free[best]);
        state_->free.erase(state_->free.begin() + static_cast<std::ptrdiff_t>(best));
        state_->stats.free_bytes -= kept->capacity;
        ++state_->stats.reused;
      }
    }
  }
  // Handed out outside the lock: should the shared_ptr's own allocation fail, its deleter gives the
  // buffer back, which takes the lock.
  if (kept) {
    unpoison(kept->data, kept->capacity);
    if (capacity) *capacity = kept->capacity;
    std::byte* data = kept->data;
    return std::shared_ptr<std::byte>(data, GiveBack{state_, kept.release()});
  }
  if (n < options.min_bytes) {
    if (capacity) *capacity = n;
    return std::shared_ptr<std::byte>(allocate(kSmallAlign, n), [](std::byte* p) { std::free(p); });
  }
  auto b = std::make_unique<Block>();
  b->capacity = pooled_capacity(n);
  b->data = allocate(page_bytes(), b->capacity);
  std::string why;
  // Only a buffer the pool may keep is pinned: pinning one freed when it comes back would cost
  // more than the staging copy it saves.
  const bool try_pin = options.pin && b->capacity <= options.keep_bytes && hw::can_pin_host_memory();
  if (try_pin) b->pin = hw::pin_host_memory(b->data, b->capacity, &why);
  {
    std::lock_guard lock(state_->mu);
    ++state_->stats.allocated;
    if (b->pin) {
      ++state_->stats.pinned;
      state_->stats.pinned_bytes += b->capacity;
    } else if (try_pin) {
      ++state_->stats.pin_failed;
      if (state_->stats.last_pin_error.empty())
        spdlog::warn("receive buffers: a {} byte buffer could not be pinned ({}); GPU uploads from "
                     "it go through the staging copy",
                     b->capacity, why);
      state_->stats.last_pin_error = why;
    }
  }
  if (capacity) *capacity = b->capacity;
  std::byte* data = b->data;
  return std::shared_ptr<std::byte>(data, GiveBack{state_, b.release()});
}

void HostBufferPool::set_keep_bytes(std::size_t keep_bytes) {
  std::vector<std::unique_ptr<Block>> gone;
  std::lock_guard lock(state_->mu);
  state_->options.keep_bytes = keep_bytes;
  state_->shrink_to(keep_bytes, gone);
}

void HostBufferPool::trim() {
  std::vector<std::unique_ptr<Block>> gone;
  std::lock_guard lock(state_->mu);
  state_->shrink_to(0, gone);
}

HostBufferPoolStats HostBufferPool::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

HostBufferPoolOptions HostBufferPool::options() const {
  std::lock_guard lock(state_->mu);
  return state_->options;
}

HostBufferPool& receive_buffers() {
  // Never destroyed: at exit its pinned buffers would be unpinned against GPU contexts already
  // torn down; the process's end releases them.
  static HostBufferPool* pool = new HostBufferPool();
  return *pool;
}

}  // namespace dype::rt
