#pragma once
// dype.admin.DypeAdmin over gRPC (runtime/daemon/proto/dype_admin.proto), the HTTP admin API's
// twin: each RPC checks the token from the "authorization" metadata and answers AdminApi's JSON
// document.
#include <memory>

#include <grpcpp/grpcpp.h>

#include "runtime/daemon/admin/admin.h"

namespace dype::rt::daemon {

std::unique_ptr<grpc::Service> make_grpc_admin_service(AdminApi& api);

}  // namespace dype::rt::daemon
