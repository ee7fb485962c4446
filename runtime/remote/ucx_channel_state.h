#pragma once
// UcxChannel's inner state (ucx_channel.h keeps it opaque): the channel protocol's message ids,
// the sends and receives in flight, and the endpoint with its UCX callbacks. Shared by
// ucx_channel.cpp (the channel) and ucx_listener.cpp (the listener and acceptor that make channels).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "runtime/remote/ucx_channel.h"

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

}  // namespace dype::rt::remote
