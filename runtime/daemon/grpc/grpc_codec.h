#pragma once
// KServe v2 protobuf messages <-> the daemon's protocol tensors, with the same checks as the
// JSON/binary path (kserve/), and exceptions -> gRPC status through the daemon's one error table.
#include <cstdint>
#include <exception>
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

// raw_input_contents are viewed in place (Tensor::view): `request` must outlive the result.
InferRequest from_proto(const inference::ModelInferRequest& request);
// The same, with raw_input_contents moved out of `request` into memory the result holds
// (InferRequest::held), so the engine may read them in place after `request` is reused.
InferRequest take_from_proto(inference::ModelInferRequest& request);
// The answer's outputs as raw_output_contents, one per output, in order.
void to_proto(const std::string& model, std::int64_t version, const std::string& id, const std::vector<Tensor>& outputs,
              inference::ModelInferResponse& response);
// The value of metadata `key` the client sent ("" when it sent none), e.g. "authorization".
std::string metadata_value(const grpc::ServerContextBase& context, std::string_view key);

// The exception's status (errors.h's table); `reason` gets the metrics' reason label.
grpc::Status status_of(std::exception_ptr error, std::string& reason);

}  // namespace dype::rt::daemon
