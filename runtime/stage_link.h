#pragma once
// A pipeline stage whose devices are on another host. The pipeline hands it the stage's input
// tensors on this host and takes back the tensors its last kernel hands on; how they travel and
// where the kernels run is the link's business (runtime/remote/ implements it over UCX, with a
// stage server on the other host running the kernels on its own devices).
//
//   rt::PipelineStage remote{.first = 2, .last = 3, .remote = link};   // no local devices
//
// A link serves one stage of one pipeline: the stage's worker calls run() for one request at a
// time, in submission order.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace dype::rt {

class StageLink {
 public:
  virtual ~StageLink() = default;
  // Runs kernels [first, last] of `request` (plan epoch `epoch`, pipeline sequence `seq`) on the
  // remote devices. `inputs`: the tensors kernel `first` reads, whole (every row), in the order
  // of the activation (Q, K, V, then a carried skip tensor). Returns the tensors kernel `last`
  // hands on, whole. Throws hw::DeviceError naming where() when the host failed or cannot be
  // reached (the pipeline then treats the stage as a dead device), InputError when the remote
  // side refused the request.
  virtual std::vector<HostTensor> run(const Request& request, std::uint64_t epoch, std::uint64_t seq, int first,
                                      int last, std::span<const HostTensor> inputs) = 0;
  // Where the stage runs, for plans, errors and metrics: "b/gpu0+gpu1".
  virtual std::string where() const = 0;
};

}  // namespace dype::rt
