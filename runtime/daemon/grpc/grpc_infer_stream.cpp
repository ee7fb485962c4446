#include <atomic>
#include <deque>
#include <future>

#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/grpc/grpc_inference_service.h"
#include "runtime/daemon/grpc/grpc_wire.h"
#include "runtime/daemon/kserve/request_builder.h"

namespace dype::rt::daemon {
namespace {
using Clock = GrpcClock;
using StreamBase = InferStreamReactor;

// A stream refused before its first read (token, stream cap, shutdown): finished at once.
class RefusedStream final : public StreamBase {
 public:
  explicit RefusedStream(grpc::Status st) { Finish(std::move(st)); }
  void OnDone() override { delete this; }
};
}  // namespace

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
class InferStream final : public StreamBase {
 public:
  static constexpr std::size_t kWindow = 8;
  InferStream(GrpcInferenceService& impl, std::string owner) : s_(impl), owner_(std::move(owner)) {}
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
  // An answer's tensor and its outputs (views of it), kept while gRPC sends them.
  struct Answered {
    HostTensor y;
    std::vector<Tensor> outputs;
  };
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
    std::optional<Clock::time_point> deadline;         // parameters.timeout from t0
    std::unique_ptr<AdmissionControl::Ticket> ticket;  // held until answered
    std::shared_ptr<Reply> reply;  // taken by try_infer: answered through this, `y` unused
    std::future<HostTensor> y;
    std::vector<std::string> outputs;  // the names to answer with
    std::vector<RequestedOutput> requested;  // as asked for: those bound for shared memory carry a sink
    std::exception_ptr error;          // refused before reaching the engine
    grpc::ByteBuffer out;              // the answer, serialised, written once every earlier one is
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
    if (items_.empty() && !submitting_ && !awaiting_ && !writing_ && kicks_ == 0 &&
        callbacks_ == 0) {
      if (cancelled_) return finish_locked({grpc::StatusCode::CANCELLED, "stream cancelled"});
      if (read_closed_) return finish_locked(grpc::Status::OK);
      if (stopping_)
        return finish_locked({grpc::StatusCode::UNAVAILABLE, "server is shutting down"});
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
        if (await_here)
          *await_here = true;
        else
          s_.pool->post([this] { answer_all(); });
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
    it.t0 = Clock::now();
    try {
      // The request holds what it needs (its raw contents copied out of `req_` once, into buffers
      // the engine reads in place), so `req_` can be reused at once.
      pb::ModelInferRequest header;
      auto raw = std::make_shared<ReceivedContents>();
      {
        grpc::ByteBuffer bytes;
        bytes.Swap(&req_);  // gRPC's slices go once parsed, whether or not they parse
        parse_infer_request(bytes, header, *raw);
      }
      it.model = header.model_name();
      it.id = header.id();
      it.version = s_.service.model(it.model).version;
      check_version(it.model, header.model_version(), it.version);
      it.ticket = std::make_unique<AdmissionControl::Ticket>(s_.admission);
      InferRequest in = from_received(header, raw);
      s_.bind_regions(in, owner_);
      it.requested = in.outputs;
      if (const auto timeout = request_timeout(in)) it.deadline = it.t0 + *timeout;
      if (std::optional<HostTensor> kept = answer_from_graph(s_.service, s_.graphs, it.model, in, &it.outputs,
                                                            &it.version)) {
        it.submitted = Clock::now();  // a registered graph's kept activations answered it
        it.reply = std::make_shared<Reply>();
        it.reply->y = std::move(*kept);
        it.reply->ready = true;
      } else {
        Request request = prepare_infer(s_.service, s_.graphs, it.model, in, &it.outputs,
                                        cancel_token(it.deadline, stream_cancel_));
        it.submitted = Clock::now();
        // A request with a deadline is waited for through its future, which keeps the deadline.
        if (!it.deadline) it.reply = try_submit(it.model, request, it.version);
        if (!it.reply) it.y = s_.service.infer(it.model, std::move(request), &it.version);
      }
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
  std::shared_ptr<Reply> try_submit(const std::string& model, Request& request,
                                    std::int64_t& version) {
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
      if (it && it->reply && !it->error && !it->reply->ready)
        it = nullptr;  // its completion takes over
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
    pb::ModelStreamInferResponse out;
    std::vector<std::string_view> contents;  // the outputs' bytes, sent from where they lie
    std::shared_ptr<const Answered> kept;    // holds them until gRPC has sent them
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
      auto answered = std::make_shared<Answered>();
      answered->y = std::move(y);
      answered->outputs = output_tensors(answered->y, it.outputs, /*view=*/true);
      deliver_outputs(answered->outputs, it.requested);
      to_proto(it.model, it.version, it.id, answered->outputs, *out.mutable_infer_response(),
               &contents);
      kept = std::move(answered);
      (*out.mutable_infer_response()->mutable_parameters())["dype_engine_time_us"].set_double_param(
          engine_s * 1e6);
    } catch (...) {
      const grpc::Status st = status_of(std::current_exception(), reason);
      out.Clear();
      out.set_error_message(st.error_message());
      out.mutable_infer_response()->set_model_name(it.model);
      out.mutable_infer_response()->set_id(it.id);
      contents.clear();
      kept.reset();
    }
    it.out = frame_stream_response(out, contents, std::move(kept));
    it.ticket.reset();
    s_.metrics.record(it.model, reason,
                      std::chrono::duration<double>(Clock::now() - it.t0).count());
    if (reason == "ok")
      s_.metrics.record_split(it.model, std::chrono::duration<double>(it.submitted - it.t0).count(),
                              engine_s);
  }

  GrpcInferenceService& s_;
  const std::string owner_;  // whom the stream's shared-memory regions must belong to
  grpc::ByteBuffer req_;     // the read in progress, then the request being submitted
  std::mutex mu_;
  std::deque<Item> items_;    // read, in arrival order; the front is the next to write
  std::size_t answered_ = 0;  // items_[0, answered_) have their answer encoded
  const grpc::ByteBuffer* writing_msg_ = nullptr;
  Item* answering_ = nullptr;  // Step::answer's item
  grpc::Status final_status_;
  int kicks_ = 0;      // pool tasks queued by shutdown()
  int callbacks_ = 0;  // requests taken by try_infer whose completion has not come yet
  bool advancing_ = false, reading_ = false, read_closed_ = false, submitting_ = false,
       awaiting_ = false, writing_ = false, cancelled_ = false, stopping_ = false,
       finished_ = false;
  std::atomic<bool> cancel_seen_{false};  // cancelled_, for the answering task's waits
  const std::shared_ptr<CancelToken> stream_cancel_ =
      std::make_shared<CancelToken>();  // parent of its requests' tokens
};

InferStreamReactor* GrpcInferenceService::ModelStreamInfer(Ctx* ctx) {
  if (grpc::Status st = check_token(*ctx); !st.ok()) {
    metrics.record("", "unauthorized", 0.0);
    return new RefusedStream(std::move(st));
  }
  InferStream* stream = nullptr;
  {
    std::lock_guard lock(streams_mu);
    if (stopping)
      return new RefusedStream({grpc::StatusCode::UNAVAILABLE, "server is shutting down"});
    if (streams.size() >= max_streams) {
      metrics.record("", "overloaded", 0.0);
      return new RefusedStream({grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "too many streams: " + std::to_string(streams.size()) +
                                    " ModelStreamInfer streams open (limit " +
                                    std::to_string(max_streams) +
                                    ", dype-serve --grpc-max-streams); retry later"});
    }
    stream = new InferStream(*this, owner_of(*ctx));
    streams.insert(stream);
  }
  stream->start();
  return stream;
}

void GrpcInferenceService::begin_stop() {
  std::lock_guard lock(streams_mu);
  stopping = true;
  for (InferStream* s : streams) s->shutdown();
}

}  // namespace dype::rt::daemon
