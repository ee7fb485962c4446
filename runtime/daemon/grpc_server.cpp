#include "runtime/daemon/grpc_server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_set>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "runtime/daemon/admin.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc_repository.h"
#include "runtime/daemon/request_builder.h"
#include "runtime/daemon/worker_pool.h"
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

// The inference service. RPCs that never wait on the engine (health, metadata) are callbacks
// answered on gRPC's threads; ModelInfer and ModelStreamInfer are callbacks whose blocking part
// (building and submitting a request, which waits for room in the engine, and waiting for the
// engine's answer) runs on the front end's WorkerPool, so a stream holds no thread while idle;
// the repository RPCs, which load models, stay on gRPC's synchronous threads.
namespace {
using CallbackBase = pb::GRPCInferenceService::WithCallbackMethod_ServerLive<
    pb::GRPCInferenceService::WithCallbackMethod_ServerReady<pb::GRPCInferenceService::WithCallbackMethod_ModelReady<
        pb::GRPCInferenceService::WithCallbackMethod_ServerMetadata<
            pb::GRPCInferenceService::WithCallbackMethod_ModelMetadata<pb::GRPCInferenceService::WithCallbackMethod_ModelInfer<
                pb::GRPCInferenceService::WithCallbackMethod_ModelStreamInfer<pb::GRPCInferenceService::Service>>>>>>>;
using StreamBase = grpc::ServerBidiReactor<pb::ModelInferRequest, pb::ModelStreamInferResponse>;

// A stream refused before its first read (token, stream cap, shutdown): finished at once.
class RefusedStream final : public StreamBase {
 public:
  explicit RefusedStream(grpc::Status st) { Finish(std::move(st)); }
  void OnDone() override { delete this; }
};
}  // namespace

struct GrpcServer::Impl final : public CallbackBase {
  class Stream;
  InferenceService& service;
  GraphRegistry& graphs;
  Metrics& metrics;
  AdmissionControl& admission;
  AdminApi* admin;  // the repository RPCs' token check and calls (grpc_repository.h); may be null
  std::string infer_token;  // non-empty: ModelInfer and ModelStreamInfer need it
  std::size_t max_streams = 4096;  // ModelStreamInfer streams open at once; more: RESOURCE_EXHAUSTED
  std::size_t max_workers = 64;    // WorkerPool bound
  std::unique_ptr<WorkerPool> pool;  // created by start(); outlives the server
  std::unique_ptr<grpc::Server> server;
  std::mutex streams_mu;
  std::condition_variable streams_cv;  // a stream closed
  std::unordered_set<Stream*> streams;  // open, not yet done
  bool stopping = false;

  Impl(InferenceService& s, GraphRegistry& g, Metrics& m, AdmissionControl& a, AdminApi* ad)
      : service(s), graphs(g), metrics(m), admission(a), admin(ad) {}

  // UNAUTHENTICATED unless the "authorization" metadata carries the inference token (when set).
  grpc::Status check_token(const grpc::ServerContextBase& ctx) const {
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

  // The client's gRPC deadline on the steady clock (none when it set none).
  static std::optional<Clock::time_point> steady_deadline(const grpc::ServerContextBase& ctx) {
    const auto d = ctx.deadline();
    if (d >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) return std::nullopt;
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(d - std::chrono::system_clock::now());
  }

  // One request start to finish (on the pool: it waits for the engine); the reason goes to the metrics.
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

  using Ctx = grpc::CallbackServerContext;
  static grpc::ServerUnaryReactor* answer_now(Ctx* ctx, grpc::Status st) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(std::move(st));
    return reactor;
  }

  grpc::ServerUnaryReactor* ServerLive(Ctx* c, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override {
    r->set_live(true);
    return answer_now(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(Ctx* c, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override {
    r->set_ready(admission.ready());
    return answer_now(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(Ctx* c, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override {
    std::string reason;
    try {
      r->set_ready(service.model_ready(q->name()) && admission.ready());
      return answer_now(c, grpc::Status::OK);
    } catch (...) {
      return answer_now(c, status_of(std::current_exception(), reason));
    }
  }
  grpc::ServerUnaryReactor* ServerMetadata(Ctx* c, const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* r) override {
    r->set_name("dype");
    r->set_version("0.1.0");
    for (const char* e : {"binary_tensor_data", "model_repository", "dype_graphs", "dype_admin", "dype_plan"})
      r->add_extensions(e);
    return answer_now(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelMetadata(Ctx* c, const pb::ModelMetadataRequest* q,
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
      return answer_now(c, grpc::Status::OK);
    } catch (...) {
      return answer_now(c, status_of(std::current_exception(), reason));
    }
  }
  // Checked on gRPC's thread; parsed, run and waited for on the pool, which finishes the call.
  grpc::ServerUnaryReactor* ModelInfer(Ctx* ctx, const pb::ModelInferRequest* q, pb::ModelInferResponse* r) override {
    if (grpc::Status st = check_token(*ctx); !st.ok()) {
      metrics.record(q->model_name(), "unauthorized", 0.0);
      return answer_now(ctx, std::move(st));
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    pool->post([this, reactor, q, r, deadline = steady_deadline(*ctx)] { reactor->Finish(infer_one(*q, *r, deadline)); });
    return reactor;
  }
  StreamBase* ModelStreamInfer(Ctx* ctx) override;

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

// One ModelStreamInfer stream as a callback reactor. Each request is read on gRPC's thread, built
// and submitted to the engine on the pool, and answered in arrival order: the pool waits for the
// oldest unanswered request's answer and the reactor writes the answers one at a time. Up to
// `kWindow` requests of a stream are in the pipeline at once; the next read starts when there is
// room, so a client sending faster is held back by gRPC's flow control. An idle stream holds an
// outstanding read and no thread.
//
// Every state change goes through advance(change), under mu_: the thread that finds nobody else
// advancing decides the next steps (read, write, finish) and makes those gRPC calls without the
// lock, one at a time, until there is nothing left to do, so gRPC's reactions (which may run inline
// in a Start call) never wait on mu_ and Finish is called once, when nothing else refers to the
// stream any more (the reactor may be deleted as soon as it is called). A request the service takes
// without waiting (InferenceService::try_infer: dynamic batching, or an engine with room) is
// answered by its completion, which advances the stream on the completing thread: the answer is
// encoded and written there, and no thread waits for it. Otherwise (the engine full, a deadline to
// keep) the request goes through a future: an answer already given when the stream looks for it
// is encoded by the advancing thread itself; one still to come is waited for on the pool: by the
// pool thread that just submitted, when it is the one advancing (no hand-off to another thread),
// else by a task posted for it.
class GrpcServer::Impl::Stream final : public StreamBase {
 public:
  static constexpr std::size_t kWindow = 8;
  explicit Stream(Impl& impl) : s_(impl) {}
  void start() {
    advance([] {});
  }
  // Server shutdown: no more reads; finishes (UNAVAILABLE) once the requests read are answered.
  void shutdown() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    ++kicks_;  // keeps the stream alive until the pool's advance below has run
    s_.pool->post([this] { advance([this] { --kicks_; }); });
  }

  void OnReadDone(bool ok) override {
    advance([&] {
      reading_ = false;
      if (!ok) {
        read_closed_ = true;
      } else if (!cancelled_) {
        submitting_ = true;
        s_.pool->post([this] { submit(); });
      }
    });
  }
  void OnWriteDone(bool ok) override {
    advance([&] {
      writing_ = false;
      items_.pop_front();
      --answered_;
      if (!ok) cancel_locked();  // the client is gone
    });
  }
  void OnCancel() override {
    advance([&] { cancel_locked(); });
  }
  void OnDone() override {
    { std::lock_guard lock(mu_); }  // after the last advance's accesses (see advance)
    {
      std::lock_guard lock(s_.streams_mu);
      s_.streams.erase(this);
    }
    s_.streams_cv.notify_all();
    delete this;
  }

 private:
  // The answer of a request taken by try_infer, set by its completion (under mu_).
  struct Reply {
    bool ready = false;
    HostTensor y;
    std::exception_ptr error;
  };
  struct Item {
    std::string model, id;
    std::int64_t version = 1;
    Clock::time_point t0, submitted;
    std::optional<Clock::time_point> deadline;  // parameters.timeout from t0
    std::unique_ptr<AdmissionControl::Ticket> ticket;  // held until answered
    std::shared_ptr<Reply> reply;  // taken by try_infer: answered through this, `y` unused
    std::future<HostTensor> y;
    std::vector<std::string> outputs;  // the names to answer with
    std::exception_ptr error;  // refused before reaching the engine
    pb::ModelStreamInferResponse out;  // the answer, written once every earlier one is
  };
  enum class Step { none, read, write, answer, finish };

  // on_pool: the caller is a pool thread, which may wait for an answer after advancing.
  template <typename F>
  void advance(F&& change, bool on_pool = false) {
    std::unique_lock lock(mu_);
    change();
    if (advancing_) return;  // the advancing thread looks again after its current call
    advancing_ = true;
    bool await_here = false;  // this thread waits for the answers (answer_all) once done advancing
    for (;;) {
      const Step step = next_locked(on_pool && !await_here ? &await_here : nullptr);
      if (step == Step::none) {
        advancing_ = false;
        lock.unlock();
        if (await_here) answer_all();  // awaiting_ keeps the stream from finishing until it is done
        return;
      }
      // Taken out under the lock: OnDone locks mu_ before deleting, so the stream's own members are
      // last touched under it.
      grpc::Status final_status = step == Step::finish ? std::move(final_status_) : grpc::Status();
      lock.unlock();
      if (step == Step::read) StartRead(&req_);
      if (step == Step::write) StartWrite(writing_msg_);
      if (step == Step::answer) answer(*answering_);
      if (step == Step::finish) {
        Finish(std::move(final_status));
        return;  // OnDone may delete this at any time now
      }
      lock.lock();
      if (step == Step::answer) {
        ++answered_;
        awaiting_ = false;
      }
    }
  }

  // What to do next, given the state; starts the pool's answering task when there is work for it
  // (or, given `await_here`, sets it: the calling pool thread runs answer_all itself).
  Step next_locked(bool* await_here = nullptr) {
    if (finished_) return Step::none;
    if (cancelled_ && !submitting_ && !awaiting_ && !writing_) {
      items_.clear();  // queued work dropped: admission tickets released, engine answers discarded
      answered_ = 0;
    }
    if (items_.empty() && !submitting_ && !awaiting_ && !writing_ && kicks_ == 0 && callbacks_ == 0) {
      if (cancelled_) return finish_locked({grpc::StatusCode::CANCELLED, "stream cancelled"});
      if (read_closed_) return finish_locked(grpc::Status::OK);
      if (stopping_) return finish_locked({grpc::StatusCode::UNAVAILABLE, "server is shutting down"});
    }
    if (cancelled_) return Step::none;
    if (!awaiting_ && answered_ < items_.size()) {
      Item& next = items_[answered_];
      if (next.reply && !next.error) {
        // Taken by try_infer: encoded once its completion has come (which advances the stream).
        if (next.reply->ready) {
          awaiting_ = true;
          answering_ = &next;
          return Step::answer;
        }
      } else {
        awaiting_ = true;
        // An answer that is already there is encoded by this thread (no wait, no hand-off).
        if (next.error || next.y.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
          answering_ = &next;
          return Step::answer;
        }
        if (await_here) *await_here = true;
        else s_.pool->post([this] { answer_all(); });
      }
    }
    if (!writing_ && answered_ > 0) {
      writing_ = true;
      writing_msg_ = &items_.front().out;
      return Step::write;
    }
    if (!reading_ && !read_closed_ && !submitting_ && !stopping_ && items_.size() < kWindow) {
      reading_ = true;
      return Step::read;
    }
    return Step::none;
  }
  Step finish_locked(grpc::Status st) {
    finished_ = true;
    final_status_ = std::move(st);
    return Step::finish;
  }
  void cancel_locked() {
    cancelled_ = true;
    cancel_seen_.store(true);
    stream_cancel_->cancelled.store(true);  // the engine stops running this stream's requests
  }

  // On the pool: builds and submits the request just read (req_ is free for the next read after).
  void submit() {
    Item it;
    it.model = req_.model_name();
    it.id = req_.id();
    it.t0 = Clock::now();
    try {
      it.version = s_.service.model(it.model).version;
      check_version(it.model, req_.model_version(), it.version);
      it.ticket = std::make_unique<AdmissionControl::Ticket>(s_.admission);
      // The engine's request owns copies of what it needs, so `req_` can be reused at once.
      const InferRequest in = from_proto(req_);
      if (const auto timeout = request_timeout(in)) it.deadline = it.t0 + *timeout;
      Request request = prepare_infer(s_.service, s_.graphs, it.model, in, &it.outputs,
                                      cancel_token(it.deadline, stream_cancel_));
      it.submitted = Clock::now();
      // A request with a deadline is waited for through its future, which keeps the deadline.
      if (!it.deadline) it.reply = try_submit(it.model, request, it.version);
      if (!it.reply) it.y = s_.service.infer(it.model, std::move(request), &it.version);
    } catch (...) {
      it.error = std::current_exception();
    }
    advance(
        [&] {
          submitting_ = false;
          items_.push_back(std::move(it));
        },
        /*on_pool=*/true);
  }

  // The service's try_infer: the reply its completion will fill (the completion advances the
  // stream, which lives until every completion has come: callbacks_), or null when it declined.
  std::shared_ptr<Reply> try_submit(const std::string& model, Request& request, std::int64_t& version) {
    auto reply = std::make_shared<Reply>();
    InferenceService::InferDone done = [this, reply](HostTensor y, std::exception_ptr error) {
      advance([&] {
        reply->y = std::move(y);
        reply->error = std::move(error);
        reply->ready = true;
        --callbacks_;
      });
    };
    {
      std::lock_guard lock(mu_);
      ++callbacks_;  // before the completion can come
    }
    bool taken = false;
    try {
      taken = s_.service.try_infer(model, request, &version, done);
    } catch (...) {
      std::lock_guard lock(mu_);
      --callbacks_;
      throw;
    }
    if (taken) return reply;
    std::lock_guard lock(mu_);
    --callbacks_;
    return nullptr;
  }

  // On the pool: waits for the answers of the unanswered items in order and encodes them, up to
  // one taken by try_infer whose completion has not come (that completion carries on from there).
  void answer_all() {
    Item* it = nullptr;
    auto next = [&] {
      it = cancelled_ || answered_ >= items_.size() ? nullptr : &items_[answered_];
      if (it && it->reply && !it->error && !it->reply->ready) it = nullptr;  // its completion takes over
      if (!it) awaiting_ = false;
    };
    advance(next);
    while (it) {
      answer(*it);
      advance([&] {
        ++answered_;
        next();
      });
    }
  }

  void answer(Item& it) {
    pb::ModelStreamInferResponse& out = it.out;
    std::string reason = "ok";
    double engine_s = 0.0;
    try {
      if (it.error) std::rethrow_exception(it.error);
      HostTensor y;
      if (it.reply) {
        // Ready (seen under mu_ by next_locked); its completion writes it no more.
        if (it.reply->error) std::rethrow_exception(it.reply->error);
        y = std::move(it.reply->y);
      } else {
        // In slices, so that a cancelled stream stops waiting.
        for (;;) {
          auto until = Clock::now() + std::chrono::milliseconds(50);
          if (it.deadline && *it.deadline < until) until = *it.deadline;
          if (it.y.wait_until(until) == std::future_status::ready) break;
          if (cancel_seen_.load()) return;  // dropped with the stream
          if (it.deadline && Clock::now() >= *it.deadline) break;
        }
        y = await_answer(it.y, it.deadline);
      }
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
    s_.metrics.record(it.model, reason, std::chrono::duration<double>(Clock::now() - it.t0).count());
    if (reason == "ok")
      s_.metrics.record_split(it.model, std::chrono::duration<double>(it.submitted - it.t0).count(), engine_s);
  }

  Impl& s_;
  pb::ModelInferRequest req_;  // the read in progress, then the request being submitted
  std::mutex mu_;
  std::deque<Item> items_;  // read, in arrival order; the front is the next to write
  std::size_t answered_ = 0;  // items_[0, answered_) have their answer encoded
  const pb::ModelStreamInferResponse* writing_msg_ = nullptr;
  Item* answering_ = nullptr;  // Step::answer's item
  grpc::Status final_status_;
  int kicks_ = 0;  // pool tasks queued by shutdown()
  int callbacks_ = 0;  // requests taken by try_infer whose completion has not come yet
  bool advancing_ = false, reading_ = false, read_closed_ = false, submitting_ = false, awaiting_ = false,
       writing_ = false, cancelled_ = false, stopping_ = false, finished_ = false;
  std::atomic<bool> cancel_seen_{false};  // cancelled_, for the answering task's waits
  const std::shared_ptr<CancelToken> stream_cancel_ = std::make_shared<CancelToken>();  // parent of its requests' tokens
};

StreamBase* GrpcServer::Impl::ModelStreamInfer(Ctx* ctx) {
  if (grpc::Status st = check_token(*ctx); !st.ok()) {
    metrics.record("", "unauthorized", 0.0);
    return new RefusedStream(std::move(st));
  }
  Stream* stream = nullptr;
  {
    std::lock_guard lock(streams_mu);
    if (stopping) return new RefusedStream({grpc::StatusCode::UNAVAILABLE, "server is shutting down"});
    if (streams.size() >= max_streams) {
      metrics.record("", "overloaded", 0.0);
      return new RefusedStream({grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "too many streams: " + std::to_string(streams.size()) + " ModelStreamInfer streams open (limit " +
                                    std::to_string(max_streams) + ", dype-serve --grpc-max-streams); retry later"});
    }
    stream = new Stream(*this);
    streams.insert(stream);
  }
  stream->start();
  return stream;
}

void GrpcServer::Impl::begin_stop() {
  std::lock_guard lock(streams_mu);
  stopping = true;
  for (Stream* s : streams) s->shutdown();
}

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
  grpc::Status Hosts(grpc::ServerContext* c, const Req*, Resp* r) override {
    return run(c, r, [&] { return api.hosts(); });
  }
  grpc::Status DrainHost(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_host(q->host(), true); });
  }
  grpc::Status UndrainHost(grpc::ServerContext* c, const Req* q, Resp* r) override {
    return run(c, r, [&] { return api.drain_host(q->host(), false); });
  }
  grpc::Status JoinHost(grpc::ServerContext* ctx, const dype::admin::JoinRequest* q, Resp* r) override {
    std::string reason;
    try {
      std::string auth;
      const auto& md = ctx->client_metadata();
      if (auto it = md.find("authorization"); it != md.end()) auth.assign(it->second.data(), it->second.size());
      nlohmann::json devices = nlohmann::json::array();
      for (const auto& d : q->devices())
        devices.push_back({{"name", d.name()}, {"kind", d.kind()}, {"product", d.product()}, {"bitstream", d.bitstream()},
                           {"model", d.model()}});
      r->set_json(api.join_host(auth, q->host(), q->address(), devices).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return grpc::Status::OK;
    } catch (...) {
      return status_of(std::current_exception(), reason);
    }
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
void GrpcServer::set_max_streams(std::size_t n) { impl_->max_streams = n; }
void GrpcServer::set_max_workers(std::size_t n) { impl_->max_workers = std::max<std::size_t>(1, n); }
void GrpcServer::set_tls(TlsIdentity identity) { tls_ = std::move(identity); }
std::size_t GrpcServer::streams_open() const { return impl_->streams_open(); }

void GrpcServer::start() {
  // grpc.health.v1.Health (Kubernetes' gRPC probes): SERVING while ready, NOT_SERVING from the
  // start of shutdown (set_serving).
  grpc::EnableDefaultHealthCheckService(true);
  if (!impl_->pool) impl_->pool = std::make_unique<WorkerPool>(2, impl_->max_workers);
  grpc::ServerBuilder b;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls_) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({tls_->private_key_pem, tls_->cert_chain_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  b.AddListeningPort(host_ + ":" + std::to_string(requested_port_), credentials, &port_);
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
  impl_->begin_stop();  // idle streams end now, without waiting for the deadline
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(deadline_s)));
  impl_->server->Wait();
  impl_->wait_streams_closed(5.0);  // their OnDone, which follows the call's end
  impl_->server.reset();
}

}  // namespace dype::rt::daemon
