#include "runtime/daemon/grpc_server.h"

#include <set>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "runtime/daemon/admin.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc_repository.h"
#include "runtime/daemon/request_builder.h"
#include "runtime/daemon/proto/dype_admin.grpc.pb.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

namespace dype::rt::daemon {
namespace {

using Clock = std::chrono::steady_clock;
namespace pb = inference;

// The exception's status through the daemon's one error table (errors.h); `reason` for the metrics.
grpc::Status status_of(std::exception_ptr ep, std::string& reason) {
  ErrorAnswer answer = answer_for(ep);
  reason = answer.reason;
  return {answer.grpc_code, std::move(answer.message)};
}

nlohmann::json param_json(const pb::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case pb::InferParameter::kBoolParam: return p.bool_param();
    case pb::InferParameter::kInt64Param: return p.int64_param();
    case pb::InferParameter::kStringParam: return p.string_param();
    case pb::InferParameter::kDoubleParam: return p.double_param();
    case pb::InferParameter::kUint64Param: return p.uint64_param();
    default: return nullptr;
  }
}

template <typename T, typename R>
void append_raw(std::string& raw, const R& values) {
  for (const auto& v : values) {
    const T t = static_cast<T>(v);
    raw.append(reinterpret_cast<const char*>(&t), sizeof(T));
  }
}

}  // namespace

InferRequest from_proto(const pb::ModelInferRequest& r) {
  InferRequest in;
  in.id = r.id();
  for (const auto& [k, v] : r.parameters()) in.parameters[k] = param_json(v);
  if (r.raw_input_contents_size() > 0 && r.raw_input_contents_size() != r.inputs_size())
    throw InputError("raw_input_contents", std::to_string(r.raw_input_contents_size()) + " entries for " +
                                               std::to_string(r.inputs_size()) + " inputs");
  for (int i = 0; i < r.inputs_size(); ++i) {
    const auto& t = r.inputs(i);
    Tensor x;
    x.name = t.name();
    x.datatype = t.datatype();
    x.shape.assign(t.shape().begin(), t.shape().end());
    const std::string where = "inputs['" + x.name + "']";
    for (const Tensor& prev : in.inputs)
      if (prev.name == x.name) throw InputError(where, "given twice");
    const std::size_t esize = datatype_size(x.datatype, where + ".datatype");
    std::int64_t n = 1;
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      if (x.shape[d] < 0) throw InputError(where + ".shape[" + std::to_string(d) + "]", "is negative");
      if (x.shape[d] != 0 && n > (std::int64_t{1} << 40) / x.shape[d]) throw InputError(where + ".shape", "too many elements");
      n *= x.shape[d];
    }
    if (r.raw_input_contents_size() > 0) {
      if (t.has_contents()) throw InputError(where, "has contents and raw_input_contents");
      x.view = std::string_view(r.raw_input_contents(i));  // in place: the request outlives `in`
    } else if (x.datatype == "FP32") {
      append_raw<float>(x.raw, t.contents().fp32_contents());
    } else if (x.datatype == "INT64") {
      append_raw<std::int64_t>(x.raw, t.contents().int64_contents());
    } else if (x.datatype == "INT32") {
      append_raw<std::int32_t>(x.raw, t.contents().int_contents());
    } else if (x.datatype == "FP64") {
      append_raw<double>(x.raw, t.contents().fp64_contents());
    } else {
      throw InputError(where + ".datatype", x.datatype + " is accepted only as raw_input_contents");
    }
    if (x.bytes().size() != static_cast<std::size_t>(n) * esize)
      throw InputError(where, std::to_string(x.bytes().size()) + " data bytes, " + x.datatype + " of " + std::to_string(n) +
                                  " elements needs " + std::to_string(static_cast<std::size_t>(n) * esize));
    in.inputs.push_back(std::move(x));
  }
  for (const auto& o : r.outputs()) in.outputs.push_back({o.name(), true});
  return in;
}

void to_proto(const std::string& model, std::int64_t version, const std::string& id, const std::vector<Tensor>& outputs,
              pb::ModelInferResponse& resp) {
  resp.set_model_name(model);
  resp.set_model_version(std::to_string(version));
  resp.set_id(id);
  for (const Tensor& t : outputs) {
    auto* o = resp.add_outputs();
    o->set_name(t.name);
    o->set_datatype(t.datatype);
    for (std::int64_t d : t.shape) o->add_shape(d);
    resp.add_raw_output_contents(std::string(t.bytes()));
  }
}

struct GrpcServer::Impl final : public pb::GRPCInferenceService::Service {
  InferenceService& service;
  GraphRegistry& graphs;
  Metrics& metrics;
  AdmissionControl& admission;
  AdminApi* admin;  // the repository RPCs' token check and calls (grpc_repository.h); may be null
  std::unique_ptr<grpc::Server> server;
  std::string infer_token;  // non-empty: ModelInfer and ModelStreamInfer need it

  // UNAUTHENTICATED unless the "authorization" metadata carries the inference token (when set).
  grpc::Status check_token(const grpc::ServerContext& ctx) const {
    if (infer_token.empty()) return grpc::Status::OK;
    std::string auth;
    const auto& md = ctx.client_metadata();
    if (auto it = md.find("authorization"); it != md.end()) auth.assign(it->second.data(), it->second.size());
    try {
      check_infer_token(auth, infer_token);
    } catch (const Unauthorized& e) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, e.what());
    }
    return grpc::Status::OK;
  }

  Impl(InferenceService& s, GraphRegistry& g, Metrics& m, AdmissionControl& a, AdminApi* ad)
      : service(s), graphs(g), metrics(m), admission(a), admin(ad) {}

  grpc::Status RepositoryIndex(grpc::ServerContext* c, const pb::RepositoryIndexRequest* q,
                               pb::RepositoryIndexResponse* r) override {
    return repository_index(admin, *c, *q, *r);
  }
  grpc::Status RepositoryModelLoad(grpc::ServerContext* c, const pb::RepositoryModelLoadRequest* q,
                                   pb::RepositoryModelLoadResponse*) override {
    const grpc::Status st = repository_load(admin, *c, *q);
    served_changed();
    return st;
  }
  grpc::Status RepositoryModelUnload(grpc::ServerContext* c, const pb::RepositoryModelUnloadRequest* q,
                                     pb::RepositoryModelUnloadResponse*) override {
    const grpc::Status st = repository_unload(admin, *c, *q);
    served_changed();
    return st;
  }
  // Requests for a model loaded while serving are counted under its name, not "unknown".
  void served_changed() {
    std::set<std::string> names;
    for (const ModelInfo& m : service.models()) names.insert(m.name);
    metrics.set_served(names);
  }

  // One request start to finish; the reason goes to the metrics.
  // The client's gRPC deadline on the steady clock (none when it set none).
  static std::optional<Clock::time_point> steady_deadline(const grpc::ServerContext& ctx) {
    const auto d = ctx.deadline();
    if (d >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) return std::nullopt;
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(d - std::chrono::system_clock::now());
  }

  grpc::Status infer_one(const pb::ModelInferRequest& req, pb::ModelInferResponse& resp,
                         std::optional<Clock::time_point> deadline = std::nullopt) {
    const auto t0 = Clock::now();
    std::string reason = "ok";
    grpc::Status st = grpc::Status::OK;
    try {
      std::int64_t version = service.model(req.model_name()).version;
      check_version(req.model_name(), req.model_version(), version);
      AdmissionControl::Ticket ticket(admission);
      const InferRequest in = from_proto(req);
      double engine_s = 0.0;
      const std::vector<Tensor> outputs =
          run_infer(service, graphs, req.model_name(), in, &engine_s, &version, deadline);
      // Queue: everything before the engine took it (the time since t0 not spent in the engine).
      metrics.record_split(req.model_name(),
                           std::chrono::duration<double>(Clock::now() - t0).count() - engine_s, engine_s);
      to_proto(req.model_name(), version, in.id, outputs, resp);
      (*resp.mutable_parameters())["dype_engine_time_us"].set_double_param(engine_s * 1e6);
    } catch (...) {
      st = status_of(std::current_exception(), reason);
    }
    metrics.record(req.model_name(), reason, std::chrono::duration<double>(Clock::now() - t0).count());
    return st;
  }

  grpc::Status ServerLive(grpc::ServerContext*, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override {
    r->set_ready(admission.ready());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override {
    std::string reason;
    try {
      r->set_ready(service.model_ready(q->name()) && admission.ready());
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* r) override {
    r->set_name("dype");
    r->set_version("0.1.0");
    for (const char* e : {"binary_tensor_data", "model_repository", "dype_graphs", "dype_admin", "dype_plan"})
      r->add_extensions(e);
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const pb::ModelMetadataRequest* q,
                             pb::ModelMetadataResponse* r) override {
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
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
  }
  grpc::Status ModelInfer(grpc::ServerContext* ctx, const pb::ModelInferRequest* q, pb::ModelInferResponse* r) override {
    if (grpc::Status st = check_token(*ctx); !st.ok()) {
      metrics.record(q->model_name(), "unauthorized", 0.0);
      return st;
    }
    return infer_one(*q, *r, steady_deadline(*ctx));
  }

  // Each request of a stream is parsed, built and submitted to the engine as it arrives, on this
  // thread, and answered in arrival order by a writer thread as the engine finishes it: up to
  // `window` requests of a stream are in the pipeline at once, with no thread per request (a
  // thread per request cost more than the front end's own work for small graphs).
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::ModelStreamInferResponse, pb::ModelInferRequest>* stream) override {
    if (grpc::Status st = check_token(*ctx); !st.ok()) {
      metrics.record("", "unauthorized", 0.0);
      return st;
    }
    constexpr std::size_t window = 8;
    struct Item {
      std::string model, id;
      std::int64_t version = 1;
      Clock::time_point t0, submitted;
      std::optional<Clock::time_point> deadline;  // parameters.timeout from t0
      std::unique_ptr<AdmissionControl::Ticket> ticket;  // held until answered
      std::future<HostTensor> y;
      std::vector<std::string> outputs;  // the names to answer with
      std::exception_ptr error;  // refused before reaching the engine
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> pending;
    bool reading_done = false;
    std::thread writer([&] {
      for (;;) {
        Item it;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return !pending.empty() || reading_done; });
          if (pending.empty()) return;
          it = std::move(pending.front());
          pending.pop_front();
        }
        cv.notify_all();
        pb::ModelStreamInferResponse out;
        std::string reason = "ok";
        double engine_s = 0.0;
        try {
          if (it.error) std::rethrow_exception(it.error);
          const HostTensor y = await_answer(it.y, it.deadline);
          engine_s = std::chrono::duration<double>(Clock::now() - it.submitted).count();
          to_proto(it.model, it.version, it.id, output_tensors(y, it.outputs, /*view=*/true), *out.mutable_infer_response());
          (*out.mutable_infer_response()->mutable_parameters())["dype_engine_time_us"].set_double_param(engine_s * 1e6);
        } catch (...) {
          const grpc::Status st = status_of(std::current_exception(), reason);
          out.Clear();
          out.set_error_message(st.error_message());
          out.mutable_infer_response()->set_model_name(it.model);
          out.mutable_infer_response()->set_id(it.id);
        }
        it.ticket.reset();
        metrics.record(it.model, reason, std::chrono::duration<double>(Clock::now() - it.t0).count());
        if (reason == "ok")
          metrics.record_split(it.model, std::chrono::duration<double>(it.submitted - it.t0).count(), engine_s);
        stream->Write(out);
      }
    });
    pb::ModelInferRequest req;
    while (!ctx->IsCancelled() && stream->Read(&req)) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return pending.size() < window; });
      }
      Item it;
      it.model = req.model_name();
      it.id = req.id();
      it.t0 = Clock::now();
      try {
        it.version = service.model(it.model).version;
        check_version(it.model, req.model_version(), it.version);
        it.ticket = std::make_unique<AdmissionControl::Ticket>(admission);
        // The engine's request owns copies of what it needs, so `req` can be reused at once.
        const InferRequest in = from_proto(req);
        if (const auto timeout = request_timeout(in)) it.deadline = it.t0 + *timeout;
        it.y = submit_infer(service, graphs, it.model, in, &it.submitted, &it.version, &it.outputs);
      } catch (...) {
        it.error = std::current_exception();
      }
      {
        std::lock_guard lock(mu);
        pending.push_back(std::move(it));
      }
      cv.notify_all();
    }
    {
      std::lock_guard lock(mu);
      reading_done = true;
    }
    cv.notify_all();
    writer.join();
    return grpc::Status::OK;
  }
};

// dype.admin.DypeAdmin: each RPC checks the token from the "authorization" metadata and answers
// AdminApi's JSON document.
struct GrpcServer::AdminImpl final : public dype::admin::DypeAdmin::Service {
  AdminApi& api;
  explicit AdminImpl(AdminApi& a) : api(a) {}

  template <typename F>
  grpc::Status run(grpc::ServerContext* ctx, dype::admin::AdminResponse* r, F&& f) {
    std::string reason;
    try {
      std::string auth;
      const auto& md = ctx->client_metadata();
      if (auto it = md.find("authorization"); it != md.end()) auth.assign(it->second.data(), it->second.size());
      api.authorize(auth);
      r->set_json(f().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));  // invalid UTF-8 echoed back is replaced, not a 316 throw
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
  }
  static std::optional<std::string> opt(const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  }
  using Req = dype::admin::AdminRequest;
  using Resp = dype::admin::AdminResponse;
  grpc::Status Plan(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.plan(opt(q->model())); });
  }
  grpc::Status SetMode(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.set_mode(q->mode()); });
  }
  grpc::Status Pareto(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.pareto(opt(q->model())); });
  }
  grpc::Status Devices(grpc::ServerContext* c, const Req*, Resp* r) override {
    return run(c, r, [&] { return api.devices(); });
  }
  grpc::Status DrainDevice(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_device(q->device(), true); });
  }
  grpc::Status UndrainDevice(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_device(q->device(), false); });
  }
  grpc::Status LoadBitstream(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.load_bitstream(q->device(), q->path()); });
  }
  grpc::Status UnloadBitstream(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.unload_bitstream(q->device()); });
  }
  grpc::Status ChooseImages(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] {
      return api.choose_images(opt(q->model()), q->horizon() == 0 ? std::nullopt : std::optional<double>(q->horizon()),
                               q->apply());
    });
  }
};

GrpcServer::GrpcServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, AdmissionControl& admission,
                       std::string host, int port, std::size_t max_message_bytes, AdminApi* admin)
    : impl_(std::make_unique<Impl>(service, graphs, metrics, admission, admin)),
      admin_(admin ? std::make_unique<AdminImpl>(*admin) : nullptr),
      host_(std::move(host)),
      requested_port_(port),
      max_message_bytes_(max_message_bytes) {
  std::set<std::string> names;
  for (const ModelInfo& m : service.models()) names.insert(m.name);
  metrics.set_served(names);
}

GrpcServer::~GrpcServer() { stop(0.0); }

void GrpcServer::set_infer_token(std::string token) { impl_->infer_token = std::move(token); }

void GrpcServer::start() {
  // grpc.health.v1.Health (Kubernetes' gRPC probes): SERVING while ready, NOT_SERVING from the
  // start of shutdown (set_serving).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder b;
  b.AddListeningPort(host_ + ":" + std::to_string(requested_port_), grpc::InsecureServerCredentials(), &port_);
  b.RegisterService(impl_.get());
  if (admin_) b.RegisterService(admin_.get());
  b.SetMaxReceiveMessageSize(static_cast<int>(std::min<std::size_t>(max_message_bytes_, INT32_MAX)));
  b.SetMaxSendMessageSize(INT32_MAX);
  impl_->server = b.BuildAndStart();
  if (!impl_->server || port_ <= 0) throw Error("cannot listen for gRPC on " + host_ + ":" + std::to_string(requested_port_));
  if (auto* health = impl_->server->GetHealthCheckService()) {
    // Named services are known to the health service once given a status.
    health->SetServingStatus(pb::GRPCInferenceService::service_full_name(), true);
    if (admin_) health->SetServingStatus(dype::admin::DypeAdmin::service_full_name(), true);
  }
  set_serving(true);
}

void GrpcServer::set_serving(bool serving) {
  if (!impl_ || !impl_->server) return;
  if (auto* health = impl_->server->GetHealthCheckService()) {
    health->SetServingStatus(serving);  // the server ("") and every service by name
  }
}

void GrpcServer::stop(double deadline_s) {
  if (!impl_ || !impl_->server) return;
  set_serving(false);
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(deadline_s)));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace dype::rt::daemon
