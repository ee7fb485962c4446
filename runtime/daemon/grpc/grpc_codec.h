#pragma once
// KServe v2 protobuf messages <-> the daemon's protocol tensors, with the same checks as the
// JSON/binary path (kserve/), and exceptions -> gRPC status through the daemon's one error table.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/status.h>

#include "runtime/daemon/kserve/tensor.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

namespace inference {
class ModelInferRequest;
class ModelInferResponse;
}  // namespace inference

namespace dype::rt::daemon {

class ReceivedContents;  // grpc_wire.h

// raw_input_contents are viewed in place (Tensor::view): `request` must outlive the result.
InferRequest from_proto(const inference::ModelInferRequest& request);
// A request received by the raw methods (grpc_wire.h): `header`'s fields, and raw_input_contents
// from `raw`, which the result holds (InferRequest::held) so the engine reads them in place.
InferRequest from_received(const inference::ModelInferRequest& header,
                           const std::shared_ptr<const ReceivedContents>& raw);
// The answer's outputs as raw_output_contents, one per output, in order: copied into `response`,
// or, given `raw`, listed there as views of `outputs` for frame_infer_response to send in place.
void to_proto(const std::string& model, std::int64_t version, const std::string& id,
              const std::vector<Tensor>& outputs, inference::ModelInferResponse& response,
              std::vector<std::string_view>* raw = nullptr);
// The value of metadata `key` the client sent ("" when it sent none), e.g. "authorization".
std::string metadata_value(const grpc::ServerContextBase& context, std::string_view key);

// The exception's status (errors.h's table); `reason` gets the metrics' reason label.
grpc::Status status_of(std::exception_ptr error, std::string& reason);

}  // namespace dype::rt::daemon
