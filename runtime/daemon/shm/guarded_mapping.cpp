#include "runtime/daemon/shm/guarded_mapping.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "common/error.h"

namespace dype::rt::daemon {
namespace {

// The guarded ranges, read by the signal handler without locks: a slot is in use while `start` is
// non-zero; `length` is set before `start` and cleared after it.
struct Slot {
  std::atomic<std::uintptr_t> start{0};
  std::atomic<std::size_t> length{0};
  std::atomic<bool> faulted{false};
};
Slot g_slots[GuardedMapping::kMaxMappings];
struct sigaction g_previous;
std::once_flag g_installed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const std::uintptr_t start = s.start.load(std::memory_order_acquire);
    const std::size_t length = s.length.load(std::memory_order_acquire);
    if (start == 0 || addr < start || addr >= start + length) continue;
    // Zero pages over the whole mapping: the faulting access is retried on them and succeeds.
    if (mmap(reinterpret_cast<void*>(start), length, PROT_READ | PROT_WRITE,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      s.faulted.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not ours: what would have happened without this handler.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  signal(SIGBUS, SIG_DFL);  // the access faults again and the default action follows
}

void install_handler() {
  std::call_once(g_installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_previous) != 0)
      throw Error(std::string("cannot install the SIGBUS handler: ") + std::strerror(errno));
  });
}

}  // namespace

GuardedMapping::GuardedMapping(int fd, std::size_t offset, std::size_t size, bool writable,
                               const std::string& what) {
  install_handler();
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t start = offset / page * page;
  length_ = offset - start + size;
  if (length_ == 0) length_ = page;  // an empty region still maps something to point at
  const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  base_ = mmap(nullptr, length_, prot, MAP_SHARED, fd, static_cast<off_t>(start));
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw InputError(what, std::string("cannot be mapped: ") + std::strerror(errno));
  }
  data_ = static_cast<char*>(base_) + (offset - start);
  size_ = size;
  for (slot_ = 0; slot_ < kMaxMappings; ++slot_) {
    std::uintptr_t expected = 0;
    // Claimed with a placeholder first, so that the handler never sees a start without its length.
    if (g_slots[slot_].start.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) break;
  }
  if (slot_ == kMaxMappings) {
    munmap(base_, length_);
    throw Error(what + ": more than " + std::to_string(kMaxMappings) +
                " shared-memory mappings at once");
  }
  g_slots[slot_].faulted.store(false, std::memory_order_relaxed);
  g_slots[slot_].length.store(length_, std::memory_order_release);
  g_slots[slot_].start.store(reinterpret_cast<std::uintptr_t>(base_), std::memory_order_release);
}

GuardedMapping::~GuardedMapping() {
  if (!base_) return;
  munmap(base_, length_);
  g_slots[slot_].start.store(1, std::memory_order_release);  // held until its length is cleared
  g_slots[slot_].length.store(0, std::memory_order_release);
  g_slots[slot_].start.store(0, std::memory_order_release);
}

bool GuardedMapping::intact() const {
  return !g_slots[slot_].faulted.load(std::memory_order_acquire);
}

}  // namespace dype::rt::daemon
