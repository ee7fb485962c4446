#include "runtime/remote/ucx_channel.h"

#include "runtime/remote/ucx_channel_state.h"

namespace dype::rt::remote {

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

}  // namespace dype::rt::remote
