#pragma once
// ModelInferRequest and the infer responses on the wire, for the raw gRPC methods (ModelInfer and
// ModelStreamInfer take and give grpc::ByteBuffer). A generated message would copy a 35 MB x out of
// gRPC's received slices into a std::string, and the request builder would then read it all again
// for NaN/Inf; here each raw_input_contents entry is copied once, straight from the slices into an
// aligned buffer the engine reads in place, and checked in registers as it is copied. An answer's
// raw_output_contents are sent from the engine's memory as slices (no copy into a message, no copy
// into the serialised bytes). Every other field goes through protobuf's own parser and serialiser.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "runtime/daemon/kserve/tensor.h"

namespace inference {
class ModelInferRequest;
class ModelInferResponse;
class ModelStreamInferResponse;
}  // namespace inference

namespace dype::rt::daemon {

// A request's raw_input_contents as received: one owned, 64-byte aligned buffer per entry, in
// order (a large one from the receive pool, pinned where a GPU can pin it). Owned memory cannot
// shrink under a reader, so check_read has nothing to check.
class ReceivedContents final : public HeldMemory {
 public:
  struct Entry {
    std::shared_ptr<std::byte> data;  // 64-byte aligned (null when empty)
    std::size_t size = 0;
    bool finite_f32 = false;  // read as FP32 (size a multiple of 4), it holds no NaN/Inf
  };
  void check_read(const std::string& /*where*/) const override {}
  bool known_finite_f32(const void* data, std::size_t bytes) const override;
  std::vector<Entry> entries;
};

// Parses a serialised ModelInferRequest: raw_input_contents into `raw` (copied once, each checked
// as FP32 while it is copied) and every other field into `header` (raw_input_contents empty).
// Bytes that are not a ModelInferRequest throw InputError naming "request" and the problem.
void parse_infer_request(const grpc::ByteBuffer& bytes, inference::ModelInferRequest& header,
                         ReceivedContents& raw);

// The raw_input_contents entries as views, in order (for the codec's from_proto).
std::vector<std::string_view> entry_views(const ReceivedContents& raw);

// A serialised ModelInferResponse: `response` (no raw_output_contents of its own) followed by `raw`
// as its raw_output_contents, sent from where they lie; `keep` holds that memory until gRPC has
// sent it.
grpc::ByteBuffer frame_infer_response(const inference::ModelInferResponse& response,
                                      const std::vector<std::string_view>& raw,
                                      std::shared_ptr<const void> keep);
// The same inside a ModelStreamInferResponse (its error_message, and infer_response framed as
// above).
grpc::ByteBuffer frame_stream_response(const inference::ModelStreamInferResponse& response,
                                       const std::vector<std::string_view>& raw,
                                       std::shared_ptr<const void> keep);

}  // namespace dype::rt::daemon
