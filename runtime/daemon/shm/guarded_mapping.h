#pragma once
// Client memory mapped into the daemon that cannot kill it. A client may shrink the object behind a
// registered region at any time, and touching a mapped page past the object's new end raises
// SIGBUS. As Wayland compositors do for wl_shm pools, a SIGBUS handler that finds the faulting
// address inside a guarded mapping maps zero pages over that whole mapping and marks it faulted:
// the access that faulted goes on (reading zeros, writing into pages no one sees), and the user of
// the mapping asks intact() once done and refuses the request. A fault anywhere else keeps its
// usual action (the previous handler, or the default: the process dies).
//
//   GuardedMapping m(fd, offset, size, /*writable=*/true, "region 'x'");
//   std::memcpy(m.data(), src, n);
//   if (!m.intact()) throw ...;   // the object shrank under the copy
#include <cstddef>
#include <string>

namespace dype::rt::daemon {

class GuardedMapping {
 public:
  // Maps bytes [offset, offset + size) of `fd` shared; Error naming `what` when mmap fails or too
  // many mappings are guarded at once.
  GuardedMapping(int fd, std::size_t offset, std::size_t size, bool writable,
                 const std::string& what);
  ~GuardedMapping();
  GuardedMapping(const GuardedMapping&) = delete;
  GuardedMapping& operator=(const GuardedMapping&) = delete;

  char* data() const { return data_; }
  std::size_t size() const { return size_; }
  // False once a SIGBUS hit the mapping (its contents are zeros from then on).
  bool intact() const;

  // The number of mappings that can be guarded at once.
  static constexpr std::size_t kMaxMappings = 1024;

 private:
  void* base_ = nullptr;  // page-aligned start of the mapping
  std::size_t length_ = 0;
  char* data_ = nullptr;  // base_ + (offset's distance from its page start)
  std::size_t size_ = 0;
  std::size_t slot_ = 0;
};

}  // namespace dype::rt::daemon
