// The shared-memory extensions over gRPC (Triton's SystemSharedMemory* and CudaSharedMemory* RPCs
// of inference.GRPCInferenceService): the same registry, owners and errors as over HTTP.
#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/grpc/grpc_inference_service.h"

namespace dype::rt::daemon {
namespace {

using Kind = SharedMemoryRegion::Kind;

std::optional<std::string> name_or_all(const std::string& name) {
  return name.empty() ? std::nullopt : std::optional<std::string>(name);
}

}  // namespace

GraphOwner GrpcInferenceService::graph_owner(const grpc::ServerContextBase& ctx) {
  // "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000": the address, as the HTTP front end sees it.
  std::string peer = ctx.peer();
  if (peer.rfind("ipv4:", 0) == 0) {
    peer = peer.substr(5);
    peer = peer.substr(0, peer.rfind(':'));
  } else if (peer.rfind("ipv6:[", 0) == 0) {
    peer = peer.substr(6, peer.find(']') - 6);
  }
  return {metadata_value(ctx, "dype-graph-owner"), peer};
}

std::string GrpcInferenceService::owner_of(const grpc::ServerContextBase& ctx) { return graph_owner(ctx).id(); }

void GrpcInferenceService::bind_regions(InferRequest& in, const std::string& owner) const {
  if (names_shared_memory(in)) bind_shared_memory(in, shm, owner);
}

namespace {

// The RPC's token check and registry call, its exception as the status.
template <typename F>
grpc::Status shm_call(const GrpcInferenceService& s, grpc::ServerContext* ctx, F&& f) {
  std::string reason;
  try {
    if (grpc::Status st = s.check_token(*ctx); !st.ok()) return st;
    if (!s.shm)
      throw Forbidden(
          "shared memory is off: dype-serve accepts client shared-memory regions only with "
          "--allow-client-shm");
    f(*s.shm, GrpcInferenceService::owner_of(*ctx));
    return grpc::Status::OK;
  } catch (...) {
    return status_of(std::current_exception(), reason);
  }
}

}  // namespace

grpc::Status GrpcInferenceService::SystemSharedMemoryStatus(
    grpc::ServerContext* c, const pb::SystemSharedMemoryStatusRequest* q,
    pb::SystemSharedMemoryStatusResponse* r) {
  return shm_call(*this, c, [&](SharedMemoryRegistry& shm, const std::string& owner) {
    for (const SharedMemoryRegion& g : shm.status(Kind::system, name_or_all(q->name()), owner)) {
      auto& s = (*r->mutable_regions())[g.name];
      s.set_name(g.name);
      s.set_key(g.key);
      s.set_offset(g.offset);
      s.set_byte_size(g.byte_size);
    }
  });
}

grpc::Status GrpcInferenceService::SystemSharedMemoryRegister(
    grpc::ServerContext* c, const pb::SystemSharedMemoryRegisterRequest* q,
    pb::SystemSharedMemoryRegisterResponse*) {
  return shm_call(*this, c, [&](SharedMemoryRegistry& shm, const std::string& owner) {
    shm.register_system(q->name(), q->key(), q->offset(), q->byte_size(), owner);
  });
}

grpc::Status GrpcInferenceService::SystemSharedMemoryUnregister(
    grpc::ServerContext* c, const pb::SystemSharedMemoryUnregisterRequest* q,
    pb::SystemSharedMemoryUnregisterResponse*) {
  return shm_call(*this, c, [&](SharedMemoryRegistry& shm, const std::string& owner) {
    shm.unregister(Kind::system, name_or_all(q->name()), owner);
  });
}

grpc::Status GrpcInferenceService::CudaSharedMemoryStatus(
    grpc::ServerContext* c, const pb::CudaSharedMemoryStatusRequest* q,
    pb::CudaSharedMemoryStatusResponse* r) {
  return shm_call(*this, c, [&](SharedMemoryRegistry& shm, const std::string& owner) {
    for (const SharedMemoryRegion& g : shm.status(Kind::cuda, name_or_all(q->name()), owner)) {
      auto& s = (*r->mutable_regions())[g.name];
      s.set_name(g.name);
      s.set_device_id(static_cast<std::uint64_t>(g.device_id));
      s.set_byte_size(g.byte_size);
    }
  });
}

grpc::Status GrpcInferenceService::CudaSharedMemoryRegister(
    grpc::ServerContext* c, const pb::CudaSharedMemoryRegisterRequest* q,
    pb::CudaSharedMemoryRegisterResponse*) {
  return shm_call(*this, c, [&](SharedMemoryRegistry& shm, const std::string& owner) {
    shm.register_cuda(q->name(), q->raw_handle(), q->device_id(), q->byte_size(), owner);
  });
}

grpc::Status GrpcInferenceService::CudaSharedMemoryUnregister(
    grpc::ServerContext* c, const pb::CudaSharedMemoryUnregisterRequest* q,
    pb::CudaSharedMemoryUnregisterResponse*) {
  return shm_call(*this, c, [&](SharedMemoryRegistry& shm, const std::string& owner) {
    shm.unregister(Kind::cuda, name_or_all(q->name()), owner);
  });
}

}  // namespace dype::rt::daemon
