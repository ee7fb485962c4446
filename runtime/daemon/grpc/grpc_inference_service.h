#pragma once
// inference.GRPCInferenceService (KServe v2 / Triton). RPCs that never wait on the engine (health,
// metadata) are callbacks answered on gRPC's threads; ModelInfer and ModelStreamInfer are callbacks
// whose blocking part (building and submitting a request, which waits for room in the engine, and
// waiting for the engine's answer) runs on the front end's WorkerPool, so a stream holds no thread
// while idle; the repository RPCs, which load models, stay on gRPC's synchronous threads. The
// stream reactor is grpc_infer_stream.cpp's.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include <grpcpp/grpcpp.h>

#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/admission.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/grpc/worker_pool.h"
#include "runtime/daemon/metrics.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "runtime/daemon/service.h"
#include "runtime/daemon/shm/shared_memory_registry.h"

namespace dype::rt::daemon {

namespace pb = inference;
using GrpcClock = std::chrono::steady_clock;
using InferCallbacks = pb::GRPCInferenceService::WithCallbackMethod_ServerLive<
    pb::GRPCInferenceService::WithCallbackMethod_ServerReady<
        pb::GRPCInferenceService::WithCallbackMethod_ModelReady<
            pb::GRPCInferenceService::WithCallbackMethod_ServerMetadata<
                pb::GRPCInferenceService::WithCallbackMethod_ModelMetadata<
                    pb::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        pb::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
                            pb::GRPCInferenceService::Service>>>>>>>;
// ModelInfer and ModelStreamInfer take and give serialised messages (grpc_wire.h: x copied once,
// straight out of gRPC's slices; the answer sent from the engine's memory).
using InferStreamReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

class InferStream;  // one ModelStreamInfer stream (grpc_infer_stream.cpp)

struct GrpcInferenceService final : public InferCallbacks {
  InferenceService& service;
  GraphRegistry& graphs;
  Metrics& metrics;
  AdmissionControl& admission;
  AdminApi* admin;  // the repository RPCs' token check and calls (grpc_repository.h); may be null
  SharedMemoryRegistry* shm = nullptr;  // the regions requests may name (none: refused)
  std::string infer_token;  // non-empty: ModelInfer and ModelStreamInfer need it
  std::size_t max_streams = 4096;  // ModelStreamInfer streams open at once; more: RESOURCE_EXHAUSTED
  std::size_t max_workers = 64;    // WorkerPool bound
  std::unique_ptr<WorkerPool> pool;  // created by start(); outlives the server
  std::unique_ptr<grpc::Server> server;
  std::mutex streams_mu;
  std::condition_variable streams_cv;  // a stream closed
  std::unordered_set<InferStream*> streams;  // open, not yet done
  bool stopping = false;

  GrpcInferenceService(InferenceService& s, GraphRegistry& g, Metrics& m, AdmissionControl& a, AdminApi* ad)
      : service(s), graphs(g), metrics(m), admission(a), admin(ad) {}

  // UNAUTHENTICATED unless the "authorization" metadata carries the inference token (when set).
  grpc::Status check_token(const grpc::ServerContextBase& ctx) const {
    if (infer_token.empty()) return grpc::Status::OK;
    try {
      check_infer_token(metadata_value(ctx, "authorization"), infer_token);
    } catch (const Unauthorized& e) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, e.what());
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext* c, const pb::RepositoryIndexRequest* q,
                               pb::RepositoryIndexResponse* r) override;
  grpc::Status RepositoryModelLoad(grpc::ServerContext* c, const pb::RepositoryModelLoadRequest* q,
                                   pb::RepositoryModelLoadResponse*) override;
  grpc::Status RepositoryModelUnload(grpc::ServerContext* c, const pb::RepositoryModelUnloadRequest* q,
                                     pb::RepositoryModelUnloadResponse*) override;
  // The shared-memory extensions (grpc_shared_memory.cpp): the infer token applies.
  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext* c, const pb::SystemSharedMemoryStatusRequest* q,
                                        pb::SystemSharedMemoryStatusResponse* r) override;
  grpc::Status SystemSharedMemoryRegister(grpc::ServerContext* c, const pb::SystemSharedMemoryRegisterRequest* q,
                                          pb::SystemSharedMemoryRegisterResponse* r) override;
  grpc::Status SystemSharedMemoryUnregister(grpc::ServerContext* c, const pb::SystemSharedMemoryUnregisterRequest* q,
                                            pb::SystemSharedMemoryUnregisterResponse* r) override;
  grpc::Status CudaSharedMemoryStatus(grpc::ServerContext* c, const pb::CudaSharedMemoryStatusRequest* q,
                                      pb::CudaSharedMemoryStatusResponse* r) override;
  grpc::Status CudaSharedMemoryRegister(grpc::ServerContext* c, const pb::CudaSharedMemoryRegisterRequest* q,
                                        pb::CudaSharedMemoryRegisterResponse* r) override;
  grpc::Status CudaSharedMemoryUnregister(grpc::ServerContext* c, const pb::CudaSharedMemoryUnregisterRequest* q,
                                          pb::CudaSharedMemoryUnregisterResponse* r) override;
  // The client a region belongs to, as the HTTP front end names it: the "dype-graph-owner"
  // metadata's key, else the peer's IP address.
  static std::string owner_of(const grpc::ServerContextBase& ctx);
  // The same as the graph registry's owner: the "dype-graph-owner" metadata and the peer address.
  static GraphOwner graph_owner(const grpc::ServerContextBase& ctx);
  // Binds the request's shared-memory tensors for `owner` (nothing when it names none).
  void bind_regions(InferRequest& in, const std::string& owner) const;

  // Requests for a model loaded while serving are counted under its name, not "unknown".
  void served_changed();

  // The client's gRPC deadline on the steady clock (none when it set none).
  static std::optional<GrpcClock::time_point> steady_deadline(const grpc::ServerContextBase& ctx);

  // One request start to finish, from its serialised message to the serialised answer in `resp`
  // (on the pool: it waits for the engine); the reason goes to the metrics.
  grpc::Status infer_one(const grpc::ByteBuffer& req, grpc::ByteBuffer& resp,
                         const std::string& owner,
                         std::optional<GrpcClock::time_point> deadline = std::nullopt);

  using Ctx = grpc::CallbackServerContext;
  static grpc::ServerUnaryReactor* answer_now(Ctx* ctx, grpc::Status st) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(std::move(st));
    return reactor;
  }

  grpc::ServerUnaryReactor* ServerLive(Ctx* c, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override;
  grpc::ServerUnaryReactor* ServerReady(Ctx* c, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override;
  grpc::ServerUnaryReactor* ModelReady(Ctx* c, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override;
  grpc::ServerUnaryReactor* ServerMetadata(Ctx* c, const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* r) override;
  grpc::ServerUnaryReactor* ModelMetadata(Ctx* c, const pb::ModelMetadataRequest* q,
                                          pb::ModelMetadataResponse* r) override;
  // Checked on gRPC's thread; parsed, run and waited for on the pool, which finishes the call.
  grpc::ServerUnaryReactor* ModelInfer(Ctx* ctx, const grpc::ByteBuffer* q,
                                       grpc::ByteBuffer* r) override;
  InferStreamReactor* ModelStreamInfer(Ctx* ctx) override;

  // Shutdown begins: new streams are refused, idle ones end now, busy ones once answered.
  void begin_stop();
  // Waits (up to timeout_s) until every stream is done.
  bool wait_streams_closed(double timeout_s) {
    std::unique_lock lock(streams_mu);
    return streams_cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return streams.empty(); });
  }
  std::size_t streams_open() {
    std::lock_guard lock(streams_mu);
    return streams.size();
  }
};

}  // namespace dype::rt::daemon
