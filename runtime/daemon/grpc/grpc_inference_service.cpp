#include "runtime/daemon/grpc/grpc_inference_service.h"

#include <set>

#include "hw/device_ipc_memory.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/grpc/grpc_repository.h"
#include "runtime/daemon/grpc/grpc_wire.h"
#include "runtime/daemon/kserve/request_builder.h"

namespace dype::rt::daemon {

grpc::Status GrpcInferenceService::RepositoryIndex(grpc::ServerContext* c,
                                                   const pb::RepositoryIndexRequest* q,
                                                   pb::RepositoryIndexResponse* r) {
  return repository_index(admin, *c, *q, *r);
}

grpc::Status GrpcInferenceService::RepositoryModelLoad(grpc::ServerContext* c,
                                                       const pb::RepositoryModelLoadRequest* q,
                                                       pb::RepositoryModelLoadResponse*) {
  const grpc::Status st = repository_load(admin, *c, *q);
  served_changed();
  return st;
}

grpc::Status GrpcInferenceService::RepositoryModelUnload(grpc::ServerContext* c,
                                                         const pb::RepositoryModelUnloadRequest* q,
                                                         pb::RepositoryModelUnloadResponse*) {
  const grpc::Status st = repository_unload(admin, *c, *q);
  served_changed();
  return st;
}

void GrpcInferenceService::served_changed() {
  std::set<std::string> names;
  for (const ModelInfo& m : service.models()) names.insert(m.name);
  metrics.set_served(names);
}

std::optional<GrpcClock::time_point> GrpcInferenceService::steady_deadline(
    const grpc::ServerContextBase& ctx) {
  const auto d = ctx.deadline();
  if (d >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365))
    return std::nullopt;
  return GrpcClock::now() +
         std::chrono::duration_cast<GrpcClock::duration>(d - std::chrono::system_clock::now());
}

grpc::Status GrpcInferenceService::infer_one(const grpc::ByteBuffer& bytes, grpc::ByteBuffer& resp,
                                             const std::string& owner,
                                             std::optional<GrpcClock::time_point> deadline) {
  const auto t0 = GrpcClock::now();
  std::string reason = "ok";
  grpc::Status st = grpc::Status::OK;
  pb::ModelInferRequest req;
  try {
    auto raw = std::make_shared<ReceivedContents>();
    parse_infer_request(bytes, req, *raw);
    std::int64_t version = service.model(req.model_name()).version;
    check_version(req.model_name(), req.model_version(), version);
    AdmissionControl::Ticket ticket(admission);
    InferRequest in = from_received(req, raw);
    bind_regions(in, owner);
    double engine_s = 0.0;
    // Kept until gRPC has sent the answer, which it sends from where the outputs lie.
    auto outputs = std::make_shared<std::vector<Tensor>>(
        run_infer(service, graphs, req.model_name(), in, &engine_s, &version, deadline));
    // Queue: everything before the engine took it (the time since t0 not spent in the engine).
    metrics.record_split(req.model_name(),
                         std::chrono::duration<double>(GrpcClock::now() - t0).count() - engine_s,
                         engine_s);
    pb::ModelInferResponse r;
    std::vector<std::string_view> contents;
    to_proto(req.model_name(), version, in.id, *outputs, r, &contents);
    (*r.mutable_parameters())["dype_engine_time_us"].set_double_param(engine_s * 1e6);
    resp = frame_infer_response(r, contents, outputs);
  } catch (...) {
    st = status_of(std::current_exception(), reason);
  }
  metrics.record(req.model_name(), reason,
                 std::chrono::duration<double>(GrpcClock::now() - t0).count());
  return st;
}

grpc::ServerUnaryReactor* GrpcInferenceService::ServerLive(Ctx* c, const pb::ServerLiveRequest*,
                                                           pb::ServerLiveResponse* r) {
  r->set_live(true);
  return answer_now(c, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GrpcInferenceService::ServerReady(Ctx* c, const pb::ServerReadyRequest*,
                                                            pb::ServerReadyResponse* r) {
  r->set_ready(admission.ready());
  return answer_now(c, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GrpcInferenceService::ModelReady(Ctx* c, const pb::ModelReadyRequest* q,
                                                           pb::ModelReadyResponse* r) {
  std::string reason;
  try {
    r->set_ready(service.model_ready(q->name()) && admission.ready());
    return answer_now(c, grpc::Status::OK);
  } catch (...) {
    return answer_now(c, status_of(std::current_exception(), reason));
  }
}

grpc::ServerUnaryReactor* GrpcInferenceService::ServerMetadata(Ctx* c,
                                                               const pb::ServerMetadataRequest*,
                                                               pb::ServerMetadataResponse* r) {
  r->set_name("dype");
  r->set_version("0.1.0");
  for (const char* e :
       {"binary_tensor_data", "model_repository", "dype_graphs", "dype_admin", "dype_plan", "system_shared_memory"})
    r->add_extensions(e);
  if (hw::gpu_ipc_built()) r->add_extensions("cuda_shared_memory");
  return answer_now(c, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GrpcInferenceService::ModelMetadata(Ctx* c,
                                                              const pb::ModelMetadataRequest* q,
                                                              pb::ModelMetadataResponse* r) {
  std::string reason;
  try {
    const ModelInfo m = service.model(q->name());
    check_version(m.name, q->version(), m.version);
    r->set_name(m.name);
    r->add_versions(std::to_string(m.version));
    r->set_platform("dype_" + m.family);
    auto fill = [](const std::vector<TensorSpec>& specs, auto add) {
      for (const TensorSpec& t : specs) {
        auto* o = add();
        o->set_name(t.name);
        o->set_datatype(t.datatype);
        for (std::int64_t d : t.shape) o->add_shape(d);
      }
    };
    fill(m.inputs, [r] { return r->add_inputs(); });
    fill(m.outputs, [r] { return r->add_outputs(); });
    return answer_now(c, grpc::Status::OK);
  } catch (...) {
    return answer_now(c, status_of(std::current_exception(), reason));
  }
}

grpc::ServerUnaryReactor* GrpcInferenceService::ModelInfer(Ctx* ctx, const grpc::ByteBuffer* q,
                                                           grpc::ByteBuffer* r) {
  if (grpc::Status st = check_token(*ctx); !st.ok()) {
    metrics.record("", "unauthorized", 0.0);  // the model's name is in the request, left unread
    return answer_now(ctx, std::move(st));
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  pool->post([this, reactor, q, r, owner = owner_of(*ctx), deadline = steady_deadline(*ctx)] {
    reactor->Finish(infer_one(*q, *r, owner, deadline));
  });
  return reactor;
}

}  // namespace dype::rt::daemon
