// POST /v2/models/{m}[/versions/{v}]/infer, step by step. The transport has read the body
// straight into a pooled buffer (binary section 64-byte aligned); binary tensors view that buffer
// and only x is copied, once, into the engine's tensor. A binary output is sent from the engine's
// answer as it lies, after the JSON header.
//
// Two ways through. A small binary request whose outputs all go as binary data (at most
// ServerOptions::inline_infer_max_bytes) is taken on the connection's I/O thread: checked,
// admitted, parsed, built and handed to the engine without waiting (try_post_infer); the engine's
// completion posts the answer back onto the connection's strand, where it is encoded and written.
// When the engine cannot take it without waiting, a worker submits it and waits, as for every
// other request (post_infer: JSON bodies, large bodies, JSON outputs), which runs on the worker
// pool from the start.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>

#include "runtime/daemon/http/http_answer.h"
#include "runtime/daemon/http/http_routes.h"
#include "runtime/daemon/kserve/request_builder.h"
#include "runtime/daemon/kserve/request_timing.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/daemon/shm/shared_memory_registry.h"

namespace dype::rt::daemon {

using Clock = std::chrono::steady_clock;

// Measured, per request: arrival (the transport had parsed the request line and headers), the body
// read, the handler's start (after waiting for a worker), parsed (admission + JSON header + tensor views), submitted (engine request
// built: x copy, graph normalisation), answered by the engine.
struct InferTimes {
  Arrival arrival;
  Clock::time_point read{}, started{}, parsed{}, submitted{}, answered{};
};

namespace {

// The response's JSON header, with the figures measured so far and the server time and CPU time
// written last, over placeholders, so they include the header's encoding. engine = submit to
// answer; server = arrival to the header encoded, body read included; server CPU = this thread's
// CPU time over the same span. The rest of server - engine (beyond receive, parse and build) is
// output encoding and routing.
EncodedBody encode_header(const std::string& model, std::int64_t version, const InferRequest& in,
                          const std::vector<Tensor>& outputs, const std::vector<bool>& binary, const InferTimes& t,
                          std::size_t max_json_bytes) {
  ResponseHeader h{.model_name = model, .model_version = std::to_string(version), .id = in.id,
                   .parameters = {{"dype_engine_time_us", elapsed_us(t.submitted, t.answered)},
                                  {"dype_server_time_us", kServerTimeSlot},
                                  {"dype_server_cpu_us", kServerCpuSlot},
                                  {"dype_receive_us", elapsed_us(t.arrival.wall, t.read)},
                                  {"dype_queue_us", elapsed_us(t.read, t.started)},
                                  {"dype_parse_us", elapsed_us(t.started, t.parsed)},
                                  {"dype_build_us", elapsed_us(t.parsed, t.submitted)}}};
  EncodedBody body = encode_infer_response_header(h, outputs, binary, max_json_bytes);
  fill_slot(body.body, kServerTimeSlot, elapsed_us(t.arrival.wall, Clock::now()));
  fill_slot(body.body, kServerCpuSlot, thread_cpu_us() - t.arrival.cpu_us);
  return body;
}

// Whether each output goes as binary data: as the request names it, else parameters.binary_data_output.
std::vector<bool> binary_flags(const InferRequest& in, const std::vector<Tensor>& outputs) {
  std::vector<bool> binary;
  for (const Tensor& t : outputs) {
    bool b = in.binary_output;
    for (const RequestedOutput& o : in.outputs)
      if (o.name == t.name) b = o.binary;
    binary.push_back(b);
  }
  return binary;
}

// JSON answers go as one body; binary ones as the header followed by the outputs' bytes: where they
// lie in the engine's answer `y` for a lone output (kept alive by the content provider until sent),
// else gathered into `owned`.
void send_response(HttpResponse& res, EncodedBody body, std::shared_ptr<const HostTensor> y,
                   std::shared_ptr<const std::string> owned, std::string_view data) {
  res.status = 200;
  if (body.header_length) res.set_header("Inference-Header-Content-Length", std::to_string(*body.header_length));
  res.set_content(std::move(body.body), body.content_type);
  if (data.empty()) return;
  res.tail = data;  // written after the header without a copy; y or owned holds it until then
  res.keep = owned ? std::shared_ptr<const void>(std::move(owned)) : std::shared_ptr<const void>(std::move(y));
}

}  // namespace

// One request taken on the I/O thread, from its submission to its answer: shared by the engine's
// completion, the deadline (parameters.timeout) and, when the engine was full, the worker that
// waits; the first of them to finish answers.
struct InferCall {
  std::shared_ptr<HttpReply> reply;
  std::string model;
  std::int64_t version = 0;
  InferRequest in;  // views the connection's body, which is kept until the answer is written
  std::vector<std::string> names;
  InferTimes times;
  double cpu_before_us = 0.0;  // this request's CPU time on the I/O thread before the engine
  std::optional<AdmissionControl::Ticket> ticket;
  std::atomic<bool> answered{false};
};

namespace {

// Whether every output goes as binary data (then the answer's JSON header is all there is to encode).
bool all_binary(const InferRequest& in) {
  if (in.outputs.empty()) return in.binary_output;
  for (const RequestedOutput& o : in.outputs)
    if (!o.binary) return false;
  return true;
}

}  // namespace

void HttpRoutes::post_infer(const Req& req, Res& res) {
  InferTimes times{.arrival = Arrival{req.arrival, thread_cpu_us()}};
  const std::string model = req.matches[1];
  times.read = req.received;
  times.started = Clock::now();
  const std::string reason = guarded(res, [&] { answer_infer(req, res, model, times); });
  record_infer(model, reason, times);
}

void HttpRoutes::record_infer(const std::string& model, const std::string& reason, const InferTimes& times) {
  metrics_.record(model, reason, std::chrono::duration<double>(Clock::now() - times.arrival.wall).count());
  if (reason == "ok")
    metrics_.record_split(model, std::chrono::duration<double>(times.submitted - times.read).count(),
                          std::chrono::duration<double>(times.answered - times.submitted).count());
}

// Refusals before admission: an unknown model or a version other than the one served (404).
// Returns the version served.
std::int64_t HttpRoutes::check_infer_target(const Req& req, const std::string& model) const {
  const std::int64_t version = service_.model(model).version;
  if (req.matches[2].matched) check_version(model, req.matches[2].str(), version);
  return version;
}

void HttpRoutes::answer_infer(const Req& req, Res& res, const std::string& model, InferTimes& times) {
  check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
  std::int64_t version = check_infer_target(req, model);
  AdmissionControl::Ticket admitted(admission_);
  InferRequest in = parse_infer_request(req.body, header_length(req, req.body.size()), /*borrow_binary=*/true,
                                        req.body_readable_past_end);
  // x viewed in the body is read there; the request holds the body's buffer meanwhile.
  hold_views(in, req.body, req.body_owner);
  if (names_shared_memory(in)) bind_shared_memory(in, shm_, graph_owner(req).id());
  times.parsed = Clock::now();
  std::vector<std::string> names;
  std::optional<Clock::time_point> deadline;
  if (const auto timeout = request_timeout(in)) deadline = times.arrival.wall + *timeout;  // from its arrival
  std::future<HostTensor> answer =
      submit_infer(service_, graphs_, model, in, &times.submitted, &version, &names, cancel_token(deadline));
  HostTensor y = await_answer(answer, deadline);
  times.answered = Clock::now();
  encode_infer(res, model, version, in, names, std::move(y), times);
}

void HttpRoutes::encode_infer(Res& res, const std::string& model, std::int64_t version, const InferRequest& in,
                              const std::vector<std::string>& names, HostTensor answer, const InferTimes& times) const {
  auto y = std::make_shared<const HostTensor>(std::move(answer));
  std::vector<Tensor> outputs = output_tensors(*y, names, /*view=*/true);
  deliver_outputs(outputs, in.outputs);  // those asked for in shared memory: written there, sent without data
  const std::vector<bool> binary = binary_flags(in, outputs);
  std::shared_ptr<const std::string> owned;
  std::string_view data;
  std::size_t binary_count = 0;
  for (bool b : binary) binary_count += b ? 1 : 0;
  if (binary_count == 1 && outputs.size() == 1) {
    data = outputs.front().bytes();  // zero copy: the engine's answer itself
  } else if (binary_count > 0) {
    auto gathered = std::make_shared<std::string>();
    for (std::size_t i = 0; i < outputs.size(); ++i)
      if (binary[i]) gathered->append(outputs[i].bytes());
    data = *gathered;
    owned = std::move(gathered);
  }
  send_response(res, encode_header(model, version, in, outputs, binary, times, options_.max_response_bytes), std::move(y),
                std::move(owned), data);
}

bool HttpRoutes::try_post_infer(const Req& req, const std::shared_ptr<HttpReply>& reply) {
  if (req.body.size() > options_.inline_infer_max_bytes || !req.has_header("Inference-Header-Content-Length"))
    return false;
  auto call = std::make_shared<InferCall>();
  call->reply = reply;
  InferTimes& times = call->times;
  times.arrival = Arrival{req.arrival, thread_cpu_us()};
  call->model = req.matches[1];
  times.read = req.received;
  times.started = Clock::now();
  bool declined = false;
  Res res;
  const std::string reason = guarded(res, [&] { declined = !start_infer(req, call); });
  if (declined) return false;
  if (reason != "ok") {
    record_infer(call->model, reason, times);
    reply->send(std::move(res));
  }
  return true;
}

// Checks, admits, parses, builds and hands the request to the engine without waiting; false when
// the request is better answered on a worker (outputs as JSON data), nothing answered.
bool HttpRoutes::start_infer(const Req& req, const std::shared_ptr<InferCall>& call) {
  InferTimes& times = call->times;
  check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
  call->version = check_infer_target(req, call->model);
  call->ticket.emplace(admission_);
  call->in = parse_infer_request(req.body, header_length(req, req.body.size()), /*borrow_binary=*/true,
                                 req.body_readable_past_end);
  if (!all_binary(call->in) || names_shared_memory(call->in)) {
    call->ticket.reset();
    return false;
  }
  times.parsed = Clock::now();
  std::optional<Clock::time_point> deadline;
  if (const auto timeout = request_timeout(call->in)) deadline = times.arrival.wall + *timeout;  // from its arrival
  if (std::optional<HostTensor> kept = answer_from_graph(service_, graphs_, call->model, call->in, &call->names,
                                                        &call->version)) {
    times.submitted = Clock::now();  // a registered graph's kept activations answered it
    finish_infer(*call, std::move(*kept), nullptr);
    return true;
  }
  Request request = prepare_infer(service_, graphs_, call->model, call->in, &call->names, cancel_token(deadline));
  times.submitted = Clock::now();
  InferenceService::InferDone done = [this, call](HostTensor y, std::exception_ptr error) {
    // On an engine thread: the answer is encoded on the connection's strand.
    call->reply->post_io([this, call, y = std::move(y), error]() mutable { finish_infer(*call, std::move(y), error); });
  };
  const bool taken = service_.try_infer(call->model, request, &call->version, done);
  call->cpu_before_us = thread_cpu_us() - times.arrival.cpu_us;
  if (!taken) {
    // The engine cannot take it without waiting (full, or re-planning): a worker waits for it.
    auto held = std::make_shared<Request>(std::move(request));
    call->reply->post_worker([this, call, held, deadline] {
      HostTensor y;
      std::exception_ptr error;
      // Kept here until this thread answers: the deadline may be answering on the strand meanwhile.
      const Clock::time_point submitted = Clock::now();
      try {
        std::future<HostTensor> answer = service_.infer(call->model, std::move(*held), &call->version);
        y = await_answer(answer, deadline);
      } catch (...) {
        error = std::current_exception();
      }
      finish_infer(*call, std::move(y), error, submitted);
    });
  }
  if (deadline) {
    call->reply->expire_at(*deadline, [this, call] {
      finish_infer(*call, {},
                   std::make_exception_ptr(DeadlineExceeded(
                       "deadline passed before the answer (parameters.timeout); the engine stops running the request "
                       "at its next stage")));
    });
  }
  return true;
}

// The first of the engine's answer, the deadline and the waiting worker answers; the others find
// the request answered. Runs on the connection's strand (or the worker).
void HttpRoutes::finish_infer(InferCall& call, HostTensor y, std::exception_ptr error,
                              std::optional<Clock::time_point> submitted) {
  if (call.answered.exchange(true)) return;
  InferTimes& times = call.times;
  if (submitted) times.submitted = *submitted;
  times.answered = Clock::now();
  times.arrival.cpu_us = thread_cpu_us() - call.cpu_before_us;  // CPU time: the I/O thread's part before, then this one
  Res res;
  const std::string reason = guarded(res, [&] {
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const RequestCancelled&) {
        // Only the request's own deadline cancels it here: the engine noticed it first.
        throw DeadlineExceeded("deadline passed before the answer (parameters.timeout); the engine stopped running "
                               "the request");
      }
    }
    encode_infer(res, call.model, call.version, call.in, call.names, std::move(y), times);
  });
  call.ticket.reset();
  record_infer(call.model, reason, times);
  call.reply->send(std::move(res));
}

}  // namespace dype::rt::daemon
