// The two ways a channel is accepted: UcxListener (one listening socket, accept() waits for the
// next peer) and UcxAcceptor (accept with a deadline, for a stage server's loop).
#include <sys/socket.h>

#include "runtime/remote/ucx_channel.h"
#include "runtime/remote/ucx_channel_state.h"

namespace dype::rt::remote {
namespace {

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
