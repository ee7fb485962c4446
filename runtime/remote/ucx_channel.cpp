#include "runtime/remote/ucx_channel.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace dype::rt::remote {

namespace {

// Active message ids of the channel protocol. A worker belongs to one channel, so ids need only
// be unique within it.
enum AmId : unsigned {
  kHello = 1,     // connecting side -> listener: magic + version, the first message
  kHelloAck = 2,  // listener -> connecting side: accepted
  kFrame = 3,     // an activation: 48-byte header + payload
  kCredit = 4,    // receiver -> sender: u64 count of frames consumed so far
  kBye = 5,       // "I am closing": sent after the last frame completed
  kByeAck = 6,    // "I consumed everything before your Bye": the closer may end the endpoint
};

constexpr std::uint32_t kHelloMagic = 0x48505944;  // "DYPH"
// Bound on waiting for a forced close to complete in a destructor (nothing to flush by then).
constexpr auto kForceCloseWait = std::chrono::milliseconds(1000);

// UCX reports a failed bind as a bare "Input/output error" or "Device is busy" (and logs the
// reason to stderr). Binding a throw-away socket to the same address recovers the reason for the
// error message: "; bind: Cannot assign requested address". Diagnosis only, never a transport.
std::string bind_diagnosis(const sockaddr_storage& addr, socklen_t len) {
  const int fd = ::socket(addr.ss_family, SOCK_STREAM, 0);
  if (fd < 0) return "";
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as UCX binds
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? "" : std::string("; bind: ") + std::strerror(err);
}

}  // namespace

// A frame or control message UCX has not finished sending. It owns what UCX reads from: the
// header bytes and the payload (an Activation, or a copy of raw bytes), until the request completes.
struct SendOp {
  std::array<std::byte, kActivationHeaderBytes> header{};
  std::size_t header_bytes = 0;
  Activation activation;
  std::vector<std::byte> raw;
  std::uint64_t frame = 0;
  bool is_frame = false;
  void* request = nullptr;
  bool done = false;
  ucs_status_t status = UCS_OK;
};

// A frame that arrived: either being written by a rendezvous receive, complete, or refused.
struct RecvOp {
  Activation activation;
  std::string refused;  // non-empty: the ActivationError recv() throws for this frame
  void* request = nullptr;
  bool done = false;
  ucs_status_t status = UCS_OK;
};

struct UcxChannel::State {
  State(std::shared_ptr<UcxContext> context, ChannelOptions opts)
      : worker(std::move(context)), options(opts) {
    options.window = std::max<std::uint32_t>(options.window, 1);
    set_handler(kHello, &State::on_hello);
    set_handler(kHelloAck, &State::on_hello_ack);
    set_handler(kFrame, &State::on_frame);
    set_handler(kCredit, &State::on_credit);
    set_handler(kBye, &State::on_bye);
    set_handler(kByeAck, &State::on_bye_ack);
  }
  ~State() { release(); }

  UcxWorker worker;  // first member: destroyed last, after every request below is released
  ChannelOptions options;
  ucp_ep_h ep = nullptr;
  std::string peer = "(not connected)";
  ucp_listener_h listener = nullptr;          // listening side, until accepted
  ucp_conn_request_h pending_conn = nullptr;  // listening side: the peer that knocked first
  bool many_peers = false;                      // UcxAcceptor: every peer waits in conn_queue
  std::deque<ucp_conn_request_h> conn_queue;

  bool hello = false, hello_ack = false, closed = false;
  // Closing handshake. The closer ends its endpoint only after the peer's ByeAck: UCX reports
  // the disconnect on its own connection, which may overtake the Bye, and the peer would then
  // see a failure instead of a clean close.
  bool peer_bye = false, bye_ack_sent = false, bye_acked = false;
  ucs_status_t failure = UCS_OK;  // first transport error reported for the endpoint
  std::string failure_context;

  // Sender side.
  std::uint64_t next_frame = 0;
  std::uint64_t credited = 0;  // frames the receiver reported consumed
  std::vector<std::unique_ptr<SendOp>> sends;
  // Receiver side.
  std::uint64_t expected_frame = 0;
  std::uint64_t consumed = 0;
  std::uint64_t credit_reported = 0;
  std::uint32_t peer_window = 1;
  std::vector<std::unique_ptr<RecvOp>> arrived;  // in arrival order; front is next for recv()
  std::size_t arrived_head = 0;

  Clock::time_point deadline() const { return Clock::now() + options.timeout; }
  bool failed() const { return failure != UCS_OK; }
  std::string failure_message() const {
    return "peer " + peer + " failed" + failure_context + ": " + ucs_status_string(failure) +
           " (" + std::to_string(static_cast<int>(failure)) + ")";
  }
  void check_usable(const char* op) const {
    if (closed) throw ChannelError(ChannelError::Kind::closed, std::string(op) + " on a closed channel to " + peer);
    if (ep == nullptr) throw ChannelError(ChannelError::Kind::closed, std::string(op) + " on a channel that is not connected");
  }
  void throw_if_failed() const {
    if (failed()) throw ChannelError(ChannelError::Kind::peer_failed, failure_message());
  }

  void set_handler(AmId id, ucp_am_recv_callback_t cb) {
    ucp_am_handler_param_t p{};
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                   UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = id;
    p.flags = UCP_AM_FLAG_WHOLE_MSG;
    p.cb = cb;
    p.arg = this;
    const ucs_status_t st = ucp_worker_set_am_recv_handler(worker.get(), &p);
    if (st != UCS_OK) throw ChannelError(ChannelError::Kind::setup, ucx_failure("UCX: registering a message handler", st));
  }

  // --- callbacks (run inside ucp_worker_progress) ---

  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto& s = *static_cast<State*>(arg);
    // The peer's own close() ends its endpoint after its Bye: that is not a failure.
    if (s.peer_bye || s.closed) return;
    if (s.failure == UCS_OK) s.failure = status;
  }

  static void on_conn_request(ucp_conn_request_h conn, void* arg) {
    auto& s = *static_cast<State*>(arg);
    if (s.many_peers) {
      if (s.conn_queue.size() >= kMaxWaitingPeers) ucp_listener_reject(s.listener, conn);
      else s.conn_queue.push_back(conn);
      return;
    }
    if (s.pending_conn != nullptr || s.ep != nullptr) {
      ucp_listener_reject(s.listener, conn);  // one peer per channel
      return;
    }
    s.pending_conn = conn;
  }

  static ucs_status_t on_hello(void* arg, const void* header, std::size_t header_length, void*,
                               std::size_t, const ucp_am_recv_param_t*) {
    auto& s = *static_cast<State*>(arg);
    std::uint32_t magic = 0;
    if (header_length >= sizeof magic) std::memcpy(&magic, header, sizeof magic);
    if (magic != kHelloMagic) {
      s.failure = UCS_ERR_UNSUPPORTED;
      s.failure_context = " (it is not a dype activation channel)";
    }
    s.hello = true;
    return UCS_OK;
  }

  static ucs_status_t on_hello_ack(void* arg, const void*, std::size_t, void*, std::size_t,
                                   const ucp_am_recv_param_t*) {
    static_cast<State*>(arg)->hello_ack = true;
    return UCS_OK;
  }

  static ucs_status_t on_bye(void* arg, const void*, std::size_t, void*, std::size_t,
                             const ucp_am_recv_param_t*) {
    static_cast<State*>(arg)->peer_bye = true;
    return UCS_OK;
  }

  static ucs_status_t on_bye_ack(void* arg, const void*, std::size_t, void*, std::size_t,
                                 const ucp_am_recv_param_t*) {
    static_cast<State*>(arg)->bye_acked = true;
    return UCS_OK;
  }

  // Answers the peer's Bye once (outside UCX callbacks, which must not send and wait).
  void answer_bye() {
    if (!peer_bye || bye_ack_sent || ep == nullptr || failed()) return;
    bye_ack_sent = true;
    send_control(kByeAck, nullptr, 0);
  }

  static ucs_status_t on_credit(void* arg, const void* header, std::size_t header_length, void*,
                                std::size_t, const ucp_am_recv_param_t*) {
    auto& s = *static_cast<State*>(arg);
    std::uint64_t consumed = 0;
    if (header_length == sizeof consumed) {
      std::memcpy(&consumed, header, sizeof consumed);
      // Never beyond what was sent: a confused peer must not open the window without bound.
      s.credited = std::max(s.credited, std::min(consumed, s.next_frame));
    }
    return UCS_OK;
  }

  static void on_recv_done(void*, ucs_status_t status, std::size_t, void* user_data) {
    auto& op = *static_cast<RecvOp*>(user_data);
    op.status = status;
    op.done = true;
  }

  static ucs_status_t on_frame(void* arg, const void* header, std::size_t header_length, void* data,
                               std::size_t length, const ucp_am_recv_param_t* param) {
    auto& s = *static_cast<State*>(arg);
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    auto op = std::make_unique<RecvOp>();
    RecvOp& r = *op;
    const std::uint64_t expected = s.expected_frame++;
    try {
      const ActivationHeader h = decode_header(
          {static_cast<const std::byte*>(header), header ? header_length : 0}, length, s.peer);
      if (h.frame != expected) {
        throw ActivationError("activation from " + s.peer + ", frame " + std::to_string(h.frame) +
                              ": arrived where frame " + std::to_string(expected) +
                              " was expected; refused");
      }
      s.peer_window = std::max<std::uint32_t>(h.window, 1);
      r.activation = Activation::uninitialised(h.epoch, h.seq, h.rows, h.cols, h.dtype);
    } catch (const std::exception& e) {
      r.refused = e.what();
      r.done = true;
      s.arrived.push_back(std::move(op));
      // A refused rendezvous frame is dropped without moving its payload, and the sender's
      // request completes with this status; an eager one was already here and is just dropped.
      return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    if (length == 0) {
      r.done = true;
    } else if (!rndv) {
      std::memcpy(r.activation.bytes().data(), data, length);
      r.done = true;
    } else {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE;
      p.cb.recv_am = &State::on_recv_done;
      p.user_data = &r;
      p.memory_type = UCS_MEMORY_TYPE_HOST;
      const ucs_status_ptr_t req =
          ucp_am_recv_data_nbx(s.worker.get(), data, r.activation.bytes().data(), length, &p);
      if (UCS_PTR_IS_ERR(req)) {
        r.status = UCS_PTR_STATUS(req);
        r.done = true;
      } else if (req == nullptr) {
        r.done = true;
      } else {
        r.request = req;
      }
    }
    s.arrived.push_back(std::move(op));
    return UCS_OK;
  }

  static void on_sent(void*, ucs_status_t status, void* user_data) {
    auto& op = *static_cast<SendOp*>(user_data);
    op.status = status;
    op.done = true;
  }

  // --- sending ---

  // Hands one message to UCX. The op is kept until its request completes; if UCX completed it at
  // once (small eager messages), it is dropped here.
  void start(std::unique_ptr<SendOp> op, unsigned id, const void* payload, std::size_t bytes,
             std::uint32_t flags) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = &State::on_sent;
    p.user_data = op.get();
    p.memory_type = UCS_MEMORY_TYPE_HOST;
    p.flags = flags;
    const ucs_status_ptr_t req = ucp_am_send_nbx(ep, id, op->header.data(), op->header_bytes,
                                                 payload, bytes, &p);
    if (UCS_PTR_IS_ERR(req)) {
      if (failure == UCS_OK) failure = UCS_PTR_STATUS(req);
      throw_if_failed();
    }
    if (req == nullptr) return;
    op->request = req;
    sends.push_back(std::move(op));
  }

  void send_control(AmId id, const void* header, std::size_t bytes) {
    auto op = std::make_unique<SendOp>();
    if (bytes > 0) std::memcpy(op->header.data(), header, bytes);
    op->header_bytes = bytes;
    start(std::move(op), id, nullptr, 0, UCP_AM_SEND_FLAG_EAGER);
  }

  // Releases completed sends; a frame that completed with an error fails the channel (the peer
  // refused it or the transport lost it).
  void reap_sends() {
    std::erase_if(sends, [&](const std::unique_ptr<SendOp>& op) {
      if (!op->done) return false;
      if (op->status != UCS_OK && failure == UCS_OK) {
        failure = op->status;
        if (op->is_frame) failure_context = " on frame " + std::to_string(op->frame);
      }
      ucp_request_free(op->request);
      return true;
    });
  }

  void send_frame(std::unique_ptr<SendOp> op, const void* payload, std::size_t bytes) {
    check_usable("send");
    reap_sends();
    throw_if_failed();
    // Back-pressure: wait until the receiver has consumed enough to stay within the window.
    const bool credit = worker.progress_until(
        [&] {
          reap_sends();
          return failed() || next_frame - credited < options.window;
        },
        deadline());
    throw_if_failed();
    if (!credit) {
      throw ChannelError(ChannelError::Kind::timeout,
                         "send to " + peer + ": the receiver consumed nothing for " +
                             std::to_string(options.timeout.count()) + " ms (" +
                             std::to_string(options.window) + " frames outstanding)");
    }
    op->is_frame = true;
    op->frame = next_frame;
    op->header_bytes = kActivationHeaderBytes;
    // Counted before the call: the receiver numbers frames by arrival, sent or refused alike.
    ++next_frame;
    start(std::move(op), kFrame, payload, bytes, 0);
  }

  void flush() {
    const bool done = worker.progress_until(
        [&] {
          reap_sends();
          return sends.empty() || failed();
        },
        deadline());
    throw_if_failed();
    if (!done) {
      throw ChannelError(ChannelError::Kind::timeout,
                         "flush to " + peer + ": " + std::to_string(sends.size()) +
                             " messages still in flight after " +
                             std::to_string(options.timeout.count()) + " ms");
    }
  }

  // --- closing ---

  // Closes the endpoint: `force` drops whatever is in flight (after a failure, or in a destructor).
  void close_ep(bool force, std::chrono::milliseconds wait) {
    if (ep == nullptr) return;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    const ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    ep = nullptr;
    if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
    const bool done = worker.progress_until(
        [&] { return ucp_request_check_status(req) != UCS_INPROGRESS; }, Clock::now() + wait);
    if (!done) ucp_request_cancel(worker.get(), req);
    ucp_request_free(req);
  }

  // Gives back everything UCX still holds for this channel; used by the destructor.
  void release() {
    if (listener != nullptr) {
      if (pending_conn != nullptr) ucp_listener_reject(listener, pending_conn);
      for (ucp_conn_request_h c : conn_queue) ucp_listener_reject(listener, c);
      conn_queue.clear();
      ucp_listener_destroy(listener);
      listener = nullptr;
    }
    closed = true;
    close_ep(/*force=*/true, kForceCloseWait);
    // The activations recv() already took are empty slots before arrived_head (a channel dropped
    // after a failed recv() still holds them): only the ones after it hold requests.
    arrived.erase(arrived.begin(), arrived.begin() + static_cast<std::ptrdiff_t>(arrived_head));
    arrived_head = 0;
    // Requests the forced close did not complete are cancelled; their callbacks still write
    // into the ops, which live until this returns.
    for (auto& op : sends) {
      if (!op->done) ucp_request_cancel(worker.get(), op->request);
    }
    for (auto& op : arrived) {
      if (op->request != nullptr && !op->done) ucp_request_cancel(worker.get(), op->request);
    }
    const auto all_done = [&] {
      return std::all_of(sends.begin(), sends.end(), [](auto& op) { return op->done; }) &&
             std::all_of(arrived.begin(), arrived.end(), [](auto& op) { return op->done; });
    };
    worker.progress_until(all_done, Clock::now() + kForceCloseWait);
    for (auto& op : sends) ucp_request_free(op->request);
    for (auto& op : arrived) {
      if (op->request != nullptr) ucp_request_free(op->request);
    }
    sends.clear();
    arrived.clear();
  }
};

// ------------------------------------------------------------------------------------------------

UcxChannel::UcxChannel(std::unique_ptr<State> state) : state_(std::move(state)) {}
UcxChannel::UcxChannel(UcxChannel&&) noexcept = default;
UcxChannel& UcxChannel::operator=(UcxChannel&&) noexcept = default;
UcxChannel::~UcxChannel() = default;

const std::string& UcxChannel::peer() const { return state_->peer; }

std::string UcxChannel::describe() const {
  if (state_->ep == nullptr) return "(closed)";
  char* text = nullptr;
  std::size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  if (out == nullptr) return "(no description)";
  ucp_ep_print_info(state_->ep, out);
  std::fclose(out);
  std::string result(text, size);
  std::free(text);
  return result;
}

UcxChannel UcxChannel::connect(std::shared_ptr<UcxContext> context, const HostPort& where,
                               ChannelOptions options) {
  auto s = std::make_unique<State>(std::move(context), options);
  s->peer = where.str();
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  resolve(where, addr, addr_len);

  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                 UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  p.sockaddr.addrlen = addr_len;
  // PEER mode: a dead or unreachable peer is reported through on_ep_error instead of hanging.
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &State::on_ep_error;
  p.err_handler.arg = s.get();
  const ucs_status_t st = ucp_ep_create(s->worker.get(), &p, &s->ep);
  if (st != UCS_OK) {
    s->ep = nullptr;
    throw ChannelError(ChannelError::Kind::setup, ucx_failure("cannot connect to " + s->peer, st));
  }
  const std::uint32_t hello[2] = {kHelloMagic, kActivationVersion};
  s->send_control(kHello, hello, sizeof hello);
  const bool answered =
      s->worker.progress_until([&] { return s->hello_ack || s->failed(); }, s->deadline());
  if (s->failed()) {
    throw ChannelError(ChannelError::Kind::peer_failed,
                       ucx_failure("cannot connect to " + s->peer, s->failure));
  }
  if (!answered) {
    throw ChannelError(ChannelError::Kind::timeout,
                       "cannot connect to " + s->peer + ": no answer within " +
                           std::to_string(options.timeout.count()) + " ms");
  }
  return UcxChannel(std::move(s));
}

void UcxChannel::send(Activation a) {
  auto op = std::make_unique<SendOp>();
  encode_header(header_of(a, state_->next_frame, state_->options.window),
                std::span<std::byte, kActivationHeaderBytes>(op->header));
  const void* payload = a.bytes().data();
  const std::size_t bytes = a.payload_bytes();
  op->activation = std::move(a);  // moves the buffer, not the bytes: `payload` stays valid
  state_->send_frame(std::move(op), payload, bytes);
}

void UcxChannel::send_borrowed(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows, std::uint32_t cols,
                               std::span<const float> values) {
  if (static_cast<std::uint64_t>(rows) * cols != values.size())
    throw std::invalid_argument("UcxChannel::send_borrowed: " + std::to_string(rows) + " x " + std::to_string(cols) +
                                " does not match " + std::to_string(values.size()) + " values");
  auto op = std::make_unique<SendOp>();
  ActivationHeader h;
  h.dtype = Dtype::f32;
  h.rows = rows;
  h.cols = cols;
  h.epoch = epoch;
  h.seq = seq;
  h.frame = state_->next_frame;
  h.window = state_->options.window;
  encode_header(h, std::span<std::byte, kActivationHeaderBytes>(op->header));
  state_->send_frame(std::move(op), values.data(), values.size_bytes());
}

void UcxChannel::abort() {
  if (state_) state_->release();
}

void UcxChannel::send_frame(const ActivationHeader& header, std::span<const std::byte> payload) {
  auto op = std::make_unique<SendOp>();
  encode_header(header, std::span<std::byte, kActivationHeaderBytes>(op->header));
  op->raw.assign(payload.begin(), payload.end());
  const void* data = op->raw.data();
  state_->send_frame(std::move(op), data, payload.size());
}

void UcxChannel::flush() {
  state_->check_usable("flush");
  state_->flush();
}

std::optional<Activation> UcxChannel::recv() {
  State& s = *state_;
  if (s.peer_bye && s.ep == nullptr && s.arrived_head == s.arrived.size()) return std::nullopt;
  s.check_usable("recv");
  const auto next_ready = [&] {
    return s.arrived_head < s.arrived.size() && s.arrived[s.arrived_head]->done;
  };
  const bool ready = s.worker.progress_until(
      [&] {
        s.reap_sends();
        return next_ready() || s.failed() || (s.peer_bye && s.arrived_head == s.arrived.size());
      },
      s.deadline());
  if (!next_ready()) {
    if (s.peer_bye && s.arrived_head == s.arrived.size()) {
      // The peer closed after its last frame and waits for our ByeAck. Then this end closes
      // too, without waiting on the peer (it ends its endpoint once it has the ByeAck).
      s.answer_bye();
      try {
        s.flush();
      } catch (const ChannelError&) {
        // The peer may already be gone; nothing of ours was pending that it still needed.
      }
      s.closed = true;
      s.close_ep(/*force=*/true, kForceCloseWait);
      return std::nullopt;
    }
    s.throw_if_failed();
    if (!ready) {
      throw ChannelError(ChannelError::Kind::timeout,
                         "recv from " + s.peer + ": no activation within " +
                             std::to_string(s.options.timeout.count()) + " ms");
    }
  }
  std::unique_ptr<RecvOp> op = std::move(s.arrived[s.arrived_head++]);
  if (s.arrived_head == s.arrived.size() || s.arrived_head > 64) {
    s.arrived.erase(s.arrived.begin(), s.arrived.begin() + static_cast<std::ptrdiff_t>(s.arrived_head));
    s.arrived_head = 0;
  }
  if (op->request != nullptr) ucp_request_free(op->request);
  // Every frame taken, delivered or refused, frees a slot of the sender's window. Credit goes
  // back every half window, so a blocked sender resumes while half a window is still queued here.
  ++s.consumed;
  if (s.consumed - s.credit_reported >= (s.peer_window + 1) / 2 && !s.failed()) {
    s.credit_reported = s.consumed;
    s.send_control(kCredit, &s.consumed, sizeof s.consumed);
  }
  if (!op->refused.empty()) throw ActivationError(op->refused);
  if (op->status != UCS_OK) {
    throw ChannelError(ChannelError::Kind::peer_failed,
                       ucx_failure("receiving an activation from " + s.peer, op->status));
  }
  return std::move(op->activation);
}

void UcxChannel::close() {
  State& s = *state_;
  if (s.closed || s.ep == nullptr) return;
  try {
    s.flush();
    s.send_control(kBye, nullptr, 0);
    s.flush();
  } catch (...) {
    s.closed = true;
    s.close_ep(/*force=*/true, kForceCloseWait);
    throw;
  }
  // Every frame has completed (delivered into the peer's memory or its transport). Wait for the
  // peer to take them and acknowledge, answering its own Bye meanwhile so that two sides closing
  // at once do not wait for each other. The peer ending its endpoint first also ends the wait:
  // UCX reports that disconnect on its own connection, which may overtake the ByeAck. A peer that
  // does not answer within the timeout is closed on anyway: close() must not hang on it.
  s.worker.progress_until(
      [&] {
        s.answer_bye();
        return s.bye_acked || s.failed();
      },
      s.deadline());
  s.closed = true;
  s.close_ep(/*force=*/true, kForceCloseWait);
}

// ------------------------------------------------------------------------------------------------

UcxListener::UcxListener(std::shared_ptr<UcxContext> context, const HostPort& where,
                         ChannelOptions options)
    : state_(std::make_unique<UcxChannel::State>(std::move(context), options)) {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  resolve(where, addr, addr_len);
  ucp_listener_params_t p{};
  p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  p.sockaddr.addrlen = addr_len;
  p.conn_handler.cb = &UcxChannel::State::on_conn_request;
  p.conn_handler.arg = state_.get();
  const ucs_status_t st = ucp_listener_create(state_->worker.get(), &p, &listener_);
  if (st != UCS_OK) {
    listener_ = nullptr;
    throw ChannelError(ChannelError::Kind::setup,
                       ucx_failure("cannot listen on " + where.str(), st) + bind_diagnosis(addr, addr_len));
  }
  state_->listener = listener_;
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(listener_, &attr) == UCS_OK) {
    bound_ = attr.sockaddr;
  } else {
    bound_ = addr;
  }
}

UcxListener::~UcxListener() = default;  // the state releases the listener and any waiting peer

std::string UcxListener::address() const { return to_string(bound_); }

std::uint16_t UcxListener::port() const {
  return port_of(bound_);
}

UcxChannel UcxListener::accept() {
  if (!state_) throw ChannelError(ChannelError::Kind::closed, "listener on " + address() + " already accepted its peer");
  auto& s = *state_;
  const auto timeout_ms = std::to_string(s.options.timeout.count());
  if (!s.worker.progress_until([&] { return s.pending_conn != nullptr; }, s.deadline())) {
    throw ChannelError(ChannelError::Kind::timeout,
                       "no peer connected to " + address() + " within " + timeout_ms + " ms");
  }
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(s.pending_conn, &attr) == UCS_OK) s.peer = to_string(attr.client_address);

  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.conn_request = s.pending_conn;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &UcxChannel::State::on_ep_error;
  p.err_handler.arg = &s;
  s.pending_conn = nullptr;  // ucp_ep_create consumes it, whether it succeeds or not
  const ucs_status_t st = ucp_ep_create(s.worker.get(), &p, &s.ep);
  if (st != UCS_OK) {
    s.ep = nullptr;
    throw ChannelError(ChannelError::Kind::peer_failed, ucx_failure("accepting " + s.peer, st));
  }
  const bool greeted = s.worker.progress_until([&] { return s.hello || s.failed(); }, s.deadline());
  s.throw_if_failed();
  if (!greeted) {
    throw ChannelError(ChannelError::Kind::timeout,
                       "peer " + s.peer + " connected to " + address() + " but sent no greeting within " +
                           timeout_ms + " ms");
  }
  s.send_control(kHelloAck, nullptr, 0);
  // One peer per listener: stop listening, so the port is free and nobody else gets in.
  ucp_listener_destroy(listener_);
  listener_ = nullptr;
  s.listener = nullptr;
  return UcxChannel(std::move(state_));
}

// ------------------------------------------------------------------------------------------------

UcxAcceptor::UcxAcceptor(std::shared_ptr<UcxContext> context, const HostPort& where, ChannelOptions options)
    : context_(context), options_(options), listener_(std::move(context), where, options) {
  listener_.state_->many_peers = true;
}

UcxAcceptor::~UcxAcceptor() = default;

std::string UcxAcceptor::address() const { return listener_.address(); }
std::uint16_t UcxAcceptor::port() const { return listener_.port(); }

UcxChannel UcxAcceptor::accept(std::chrono::milliseconds wait) {
  auto& l = *listener_.state_;
  if (!l.worker.progress_until([&] { return !l.conn_queue.empty(); }, Clock::now() + wait)) {
    throw ChannelError(ChannelError::Kind::timeout,
                       "no peer connected to " + address() + " within " + std::to_string(wait.count()) + " ms");
  }
  const ucp_conn_request_h conn = l.conn_queue.front();
  l.conn_queue.pop_front();
  // The peer's channel gets a worker of its own (UCX accepts a listener's connection request on
  // another worker of the same context), so links progress independently and the listener stays.
  auto s = std::make_unique<UcxChannel::State>(context_, options_);
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(conn, &attr) == UCS_OK) s->peer = to_string(attr.client_address);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                 UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.conn_request = conn;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &UcxChannel::State::on_ep_error;
  p.err_handler.arg = s.get();
  const ucs_status_t st = ucp_ep_create(s->worker.get(), &p, &s->ep);  // consumes `conn` either way
  if (st != UCS_OK) {
    s->ep = nullptr;
    throw ChannelError(ChannelError::Kind::peer_failed, ucx_failure("accepting " + s->peer, st));
  }
  const bool greeted = s->worker.progress_until(
      [&] {
        l.worker.progress();  // peers knocking meanwhile are queued, not dropped
        return s->hello || s->failed();
      },
      s->deadline());
  s->throw_if_failed();
  if (!greeted) {
    throw ChannelError(ChannelError::Kind::timeout, "peer " + s->peer + " connected to " + address() +
                                                        " but sent no greeting within " +
                                                        std::to_string(options_.timeout.count()) + " ms");
  }
  s->send_control(kHelloAck, nullptr, 0);
  return UcxChannel(std::move(s));
}

}  // namespace dype::rt::remote
