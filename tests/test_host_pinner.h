// A host pinner that records its calls, standing in for cudaHostRegister / hipHostRegister (added
// by a GPU device when it is made) in tests that run without a GPU.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "hw/pinned_host_memory.h"

namespace dype::test {

struct PinnerCalls {
  std::vector<std::pair<void*, std::size_t>> pinned;
  std::vector<void*> unpinned;
};

// Pins as `backend`, recording each call in `calls`; one that does not work fails every pin with
// "cannot page-lock".
inline hw::HostPinner recording_pinner(const std::string& backend, PinnerCalls& calls, bool works = true) {
  return {backend,
          [&calls, works](void* p, std::size_t n, std::string& error) {
            if (!works) {
              error = "cannot page-lock";
              return false;
            }
            calls.pinned.emplace_back(p, n);
            return true;
          },
          [&calls](void* p) { calls.unpinned.push_back(p); }};
}

}  // namespace dype::test
