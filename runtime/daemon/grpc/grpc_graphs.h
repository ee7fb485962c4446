#pragma once
// dype.graphs.DypeGraphs (proto/dype_graphs.proto): graph registration and updates over gRPC,
// on gRPC's synchronous threads (registry calls never wait on the engine), with the inference
// service's token, owners and admission.
#include <memory>

#include <grpcpp/grpcpp.h>

namespace dype::rt::daemon {

struct GrpcInferenceService;

std::unique_ptr<grpc::Service> make_grpc_graph_service(GrpcInferenceService& inference);

}  // namespace dype::rt::daemon
