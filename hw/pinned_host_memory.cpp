#include "hw/pinned_host_memory.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace dype::hw {
namespace {

struct Pinned {
  std::mutex mu;
  std::vector<HostPinner> pinners;
  std::map<std::uintptr_t, std::uintptr_t> ranges;  // start -> end of each pinned range
};

Pinned& pinned() {
  static Pinned p;
  return p;
}

}  // namespace

void add_host_pinner(HostPinner pinner) {
  Pinned& p = pinned();
  std::lock_guard lock(p.mu);
  for (const HostPinner& h : p.pinners)
    if (h.backend == pinner.backend) return;
  p.pinners.push_back(std::move(pinner));
}

std::unique_ptr<PinnedHostMemory> pin_host_memory(void* data, std::size_t bytes,
                                                  std::string* why_not) {
  Pinned& p = pinned();
  std::vector<HostPinner> pinners;
  {
    std::lock_guard lock(p.mu);
    pinners = p.pinners;
  }
  if (pinners.empty() || !data || bytes == 0) {
    if (why_not)
      *why_not = pinners.empty() ? "no GPU backend has a device in this process" : "empty range";
    return nullptr;
  }
  std::unique_ptr<PinnedHostMemory> m(new PinnedHostMemory(data));
  std::string errors;
  for (const HostPinner& h : pinners) {
    std::string error;
    if (!h.pin(data, bytes, error)) {
      errors += (errors.empty() ? "" : "; ") + h.backend + ": " + error;
      continue;
    }
    m->backends_ += (m->backends_.empty() ? "" : ",") + h.backend;
    m->unpins_.push_back(h.unpin);
  }
  if (m->unpins_.empty()) {
    if (why_not) *why_not = errors;
    return nullptr;
  }
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  std::lock_guard lock(p.mu);
  p.ranges[start] = std::max(p.ranges[start], start + bytes);
  return m;
}

PinnedHostMemory::~PinnedHostMemory() {
  {
    Pinned& p = pinned();
    std::lock_guard lock(p.mu);
    p.ranges.erase(reinterpret_cast<std::uintptr_t>(data_));
  }
  for (const auto& unpin : unpins_) unpin(data_);
}

bool can_pin_host_memory() {
  Pinned& p = pinned();
  std::lock_guard lock(p.mu);
  return !p.pinners.empty();
}

bool host_memory_pinned(const void* ptr, std::size_t bytes) {
  Pinned& p = pinned();
  const auto a = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(p.mu);
  if (p.ranges.empty()) return false;
  auto it = p.ranges.upper_bound(a);  // the first range starting after a
  if (it == p.ranges.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->second;
}

}  // namespace dype::hw
