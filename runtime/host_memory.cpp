#include "runtime/host_memory.h"

#include <malloc.h>

#include <climits>

namespace dype::rt {

bool retain_freed_host_memory(std::size_t keep_bytes) {
  const int keep = keep_bytes > static_cast<std::size_t>(INT_MAX) ? INT_MAX : static_cast<int>(keep_bytes);
  // No mmap'd blocks: a large block freed goes back to the heap and the next request reuses its
  // (already faulted-in) pages, whichever thread frees and allocates it: one arena (the main one,
  // which grows with brk) serves every thread.
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_TRIM_THRESHOLD, keep) == 1;
}

bool release_free_host_memory() { return malloc_trim(0) == 1; }

}  // namespace dype::rt
