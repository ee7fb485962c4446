#pragma once
// A connected pair of endpoints that carries activations from one process to another over UCX
// active messages: one side listens on HOST:PORT (bound to that address only), the other connects.
// Either side may send and receive; frames arrive in the order they were sent.
//
//   // host B (the next stage)                        // host A (the stage before it)
//   UcxListener listener(ctx, {"10.0.0.2", 7000});    auto ch = UcxChannel::connect(ctx, {"10.0.0.2", 7000});
//   UcxChannel ch = listener.accept();                ch.send(std::move(activation));
//   while (auto a = ch.recv()) consume(*a);           ch.close();   // B's recv() then returns nullopt
//
// Back-pressure: a sender has at most `window` frames that the receiver has not yet taken with
// recv(); send() blocks (driving the worker) when it reaches that bound, and the receiver hands
// credit back every window/2 frames it consumes. So neither side holds more than `window` frames.
//
// Failures: a peer that goes away (killed, network cut, closed without close()) makes recv()/send()
// throw ChannelError(peer_failed) naming the peer and UCX's status, once the frames that arrived
// before it are consumed. A frame whose header does not match its payload is refused: recv()
// throws ActivationError for it, and the channel stays usable for the frames after it.
//
// Threads: a channel (and its worker) is driven by one thread at a time.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "runtime/remote/activation.h"
#include "runtime/remote/ucx_context.h"

namespace dype::rt::remote {

struct ChannelOptions {
  // Frames a sender may have that the receiver has not consumed (see Back-pressure above).
  std::uint32_t window = 8;
  // Bound on each blocking step: connecting, accepting, a recv() waiting for a frame, a send()
  // waiting for credit, close() flushing.
  std::chrono::milliseconds timeout{10'000};
};

class UcxChannel {
 public:
  // Connects to a UcxListener at `where`. Throws ChannelError(setup) for an unresolvable address,
  // ChannelError(peer_failed / timeout) when nobody accepts within options.timeout.
  static UcxChannel connect(std::shared_ptr<UcxContext> context, const HostPort& where,
                            ChannelOptions options = {});

  UcxChannel(UcxChannel&&) noexcept;
  UcxChannel& operator=(UcxChannel&&) noexcept;
  ~UcxChannel();  // closes without waiting for the peer if close() was not called

  // Queues `a` as the next frame; returns once it is handed to UCX (the payload stays owned by
  // the channel until the transport is done with it). Blocks while `window` frames are unconsumed.
  void send(Activation a);
  // The same for a frame given as raw parts: the header is sent as given, not checked against
  // the payload. For peers that build frames themselves, and for testing the receiver's checks.
  void send_frame(const ActivationHeader& header, std::span<const std::byte> payload);
  // A float32 frame sent from the caller's memory, without copying it: `values` must stay alive
  // and unchanged until flush() returns or abort() (a stage link sends a tensor it holds until
  // the reply). Header checks as send().
  void send_borrowed(std::uint64_t epoch, std::uint64_t seq, std::uint32_t rows, std::uint32_t cols,
                     std::span<const float> values);
  // Waits until every frame sent so far has left this process (the transport completed it).
  void flush();
  // Ends the channel at once: cancels every send and receive UCX still holds (waiting a moment
  // for them to finish) so no borrowed memory is read after this returns. Later calls fail as on
  // a closed channel.
  void abort();

  // The next frame in order; std::nullopt once the peer closed the channel cleanly and every
  // frame before that was returned. Throws ActivationError for a refused frame, ChannelError on a
  // failed peer or after options.timeout without a frame.
  std::optional<Activation> recv();

  // Flushes outstanding frames (throws ChannelError if they could not be delivered), tells the
  // peer, waits (up to the timeout) until the peer has taken every frame with recv(), and closes
  // the endpoint. The peer's recv() then returns std::nullopt.
  void close();

  // The peer as "host:port" (the address it connected from, or the one connected to).
  const std::string& peer() const;
  // UCX's description of the endpoint (ucp_ep_print_info): the transports and devices of each
  // lane, e.g. whether a same-host peer is reached over shared memory or TCP.
  std::string describe() const;

  struct State;  // shared with UcxListener and UCX's callbacks

 private:
  friend class UcxListener;
  friend class UcxAcceptor;
  explicit UcxChannel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Listens on one address (never INADDR_ANY unless given "0.0.0.0") and accepts one peer; a
// second peer that tries to connect is rejected.
class UcxListener {
 public:
  // Port 0 picks a free port (see port()). Throws ChannelError(setup) naming the address when it
  // cannot be resolved or bound.
  UcxListener(std::shared_ptr<UcxContext> context, const HostPort& where, ChannelOptions options = {});
  ~UcxListener();
  UcxListener(const UcxListener&) = delete;
  UcxListener& operator=(const UcxListener&) = delete;

  // The address actually bound, e.g. "127.0.0.1:40312".
  std::string address() const;
  std::uint16_t port() const;

  // Waits (up to options.timeout) for the peer to connect; stops listening once it has.
  UcxChannel accept();

 private:
  friend class UcxAcceptor;
  std::unique_ptr<UcxChannel::State> state_;
  ucp_listener_h listener_ = nullptr;
  sockaddr_storage bound_{};
};

// Listens on one address for as long as it lives and accepts every peer, each on a channel with
// a worker of its own (a stage server's coordinators). Peers that knock while one is being
// accepted wait in a queue (up to kMaxWaitingPeers; beyond that they are rejected).
inline constexpr std::size_t kMaxWaitingPeers = 64;
class UcxAcceptor {
 public:
  UcxAcceptor(std::shared_ptr<UcxContext> context, const HostPort& where, ChannelOptions options = {});
  ~UcxAcceptor();
  UcxAcceptor(const UcxAcceptor&) = delete;
  UcxAcceptor& operator=(const UcxAcceptor&) = delete;

  std::string address() const;
  std::uint16_t port() const;
  // The next peer (waits up to `wait`; ChannelError(timeout) when none knocked): its greeting is
  // awaited within options.timeout.
  UcxChannel accept(std::chrono::milliseconds wait);

 private:
  std::shared_ptr<UcxContext> context_;
  ChannelOptions options_;
  UcxListener listener_;
};

}  // namespace dype::rt::remote
