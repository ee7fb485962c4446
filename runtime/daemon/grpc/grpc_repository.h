#pragma once
// The model repository extension over gRPC (Triton's RepositoryIndex, RepositoryModelLoad and
// RepositoryModelUnload on inference.GRPCInferenceService), answered through AdminApi: the caller
// must send the admin token as "authorization: Bearer <token>" metadata. Without an AdminApi (no
// admin configured) every call is UNIMPLEMENTED.
#include <grpcpp/grpcpp.h>

#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

namespace dype::rt::daemon {

grpc::Status repository_index(AdminApi* admin, const grpc::ServerContext& ctx, const inference::RepositoryIndexRequest& q,
                              inference::RepositoryIndexResponse& r);
grpc::Status repository_load(AdminApi* admin, const grpc::ServerContext& ctx, const inference::RepositoryModelLoadRequest& q);
grpc::Status repository_unload(AdminApi* admin, const grpc::ServerContext& ctx,
                               const inference::RepositoryModelUnloadRequest& q);

}  // namespace dype::rt::daemon
