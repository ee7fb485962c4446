#pragma once
// UCX (UCP) handles with owners: the per-process context and a worker (the progress engine one
// thread drives), plus host:port parsing and the error type of the remote data plane. Everything
// that talks UCX in dype goes through these, so a missing or unusable UCX is one clear error.
//
//   auto ctx = UcxContext::create({.transports = "tcp"});   // or "" for UCX_TLS / UCX's choice
//   UcxWorker worker(ctx);
//   worker.progress_until([&] { return done; }, deadline);  // spins briefly, then sleeps on its fd
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dype::rt::remote {

using Clock = std::chrono::steady_clock;

// Why a remote operation failed. `setup`: UCX could not start, or an address/port was refused;
// `peer_failed`: the other side went away or the transport reported an error; `timeout`: nothing
// happened within the bound; `closed`: the channel was used after close().
class ChannelError : public std::runtime_error {
 public:
  enum class Kind { setup, peer_failed, timeout, closed };
  ChannelError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// "what: <UCS status string> (<code>)", the form every UCX failure is reported in.
std::string ucx_failure(std::string_view what, ucs_status_t status);

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};

// "10.0.0.2:7000", "[::1]:7000". Throws ChannelError(setup) naming the text on a missing or
// out-of-range port.
HostPort parse_host_port(std::string_view text);

// Resolves a numeric address or a host name to a socket address (the first of getaddrinfo's).
// Throws ChannelError(setup) with getaddrinfo's reason.
void resolve(const HostPort& where, sockaddr_storage& out, socklen_t& out_len);

// "127.0.0.1:40312" for an IPv4/IPv6 socket address, and its port alone.
std::string to_string(const sockaddr_storage& addr);
std::uint16_t port_of(const sockaddr_storage& addr);

struct UcxOptions {
  // UCX transports (the UCX_TLS syntax: "tcp", "sm", "tcp,sm", ...). Empty: the UCX_TLS
  // environment variable, else every transport UCX finds (shared memory between processes of one
  // host, TCP, InfiniBand/RoCE where present).
  std::string transports;
  // How long a waiting worker polls before it sleeps on its event fd. Polling saves the wake-up
  // (microseconds) when a core is free for each side; when sender and receiver share busy cores,
  // a poller takes the core the other side needs to produce what it waits for (measured on 2
  // loaded cores: 200 us of polling made a 1 x 1 round trip 426 us, sleeping at once ~40 us).
  std::chrono::microseconds spin{0};
};

// The process's UCP context: active messages and wake-up on an event fd. Shared by the workers
// made from it; destroyed when the last one goes.
class UcxContext {
 public:
  // Throws ChannelError(setup) when UCX cannot start (no usable transport, bad UCX_TLS).
  static std::shared_ptr<UcxContext> create(const UcxOptions& options = {});
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;
  ucp_context_h get() const { return context_; }
  const UcxOptions& options() const { return options_; }

 private:
  UcxContext(ucp_context_h context, UcxOptions options)
      : context_(context), options_(std::move(options)) {}
  ucp_context_h context_;
  UcxOptions options_;
};

// One UCP worker, driven by one thread (UCS_THREAD_MODE_SINGLE: no locks inside UCX).
class UcxWorker {
 public:
  explicit UcxWorker(std::shared_ptr<UcxContext> context);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;
  ucp_worker_h get() const { return worker_; }

  // Runs the worker's progress (callbacks fire inside) until `done()` is true or `deadline`
  // passes; returns done(). Polls for a short while first (a hand-off's latency is microseconds),
  // then sleeps on the worker's event fd so an idle receiver does not burn a core.
  bool progress_until(const std::function<bool()>& done, Clock::time_point deadline);
  // One non-blocking round of progress.
  void progress();

 private:
  std::shared_ptr<UcxContext> context_;  // outlives the worker
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::chrono::microseconds spin_;
};

}  // namespace dype::rt::remote
