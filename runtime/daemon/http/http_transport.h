#pragma once
// The HTTP/1.1 transport under the daemon's routes: Boost.Beast's parser on Asio, event-driven.
// A few I/O threads run every connection's reads and writes; a connection waiting for bytes (idle
// keep-alive, a slow client) holds a socket and a timer, never a thread. Handlers that may block
// run on a worker pool (HttpRouter's RunOn). What it enforces, each with a precise answer:
//   - a cap on open connections (beyond it: 503 and close);
//   - timeouts: idle keep-alive, the request line and headers, the body, the response write;
//   - strict framing: header bytes and field count limits (431), one Content-Length (400), a body
//     on POST/PUT/PATCH only with a length or chunked (411), bodies over the limit refused before
//     they are read (413), no Content-Encoding (415);
//   - keep-alive and pipelining (requests on one connection are answered in order);
//   - shutdown: close_all() closes every connection whatever it is doing;
//   - HTTPS on a listener given a TlsIdentity (TLS 1.2 or later): the handshake runs under the
//     header timeout and counts in the connection cap; a failed one is counted and closed.
// A Content-Length body is read straight from the socket into a pooled buffer (one allocation,
// the binary section 64-byte aligned); responses are written as one gather-write, a binary
// output straight from the engine's answer.
//
//   HttpTransport t({.io_threads = 2, .workers = 32, ...}, error_body);
//   const int port = t.listen("127.0.0.1", 0, router);      // before start()
//   t.start();  ...  t.close_all();  t.stop();
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/daemon/http/body_buffer.h"
#include "runtime/daemon/http/http_message.h"
#include "runtime/daemon/http/http_router.h"
#include "runtime/daemon/http/tls.h"
#include "runtime/daemon/http/transport_options.h"

namespace dype::rt::daemon {

class HttpTransport {
 public:
  // `error_body` turns a transport-level refusal into its response (the daemon's {"error"} JSON);
  // `on_refused` is told each refusal's status (for metrics; may be empty).
  using ErrorBody = TransportErrorBody;
  HttpTransport(TransportOptions options, ErrorBody error_body, std::function<void(int status)> on_refused = {});
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds host:port (0: ephemeral) for `router` (kept by reference); returns the port bound.
  // Error naming host:port when it cannot. With `tls`, the port speaks HTTPS with that
  // certificate and key (InputError naming --tls-cert/--tls-key when OpenSSL refuses them).
  int listen(const std::string& host, int port, const HttpRouter& router, const TlsIdentity* tls = nullptr);
  void start();
  // Stops accepting; open connections are untouched.
  void close_listeners();
  // Closes every open connection now, whatever it is doing (a handler still running finishes,
  // its answer is dropped).
  void close_all();
  // Closes everything and joins every thread (idempotent).
  void stop();

  const TransportCounters& counters() const { return counters_; }
  const TransportOptions& options() const { return options_; }

  struct Impl;  // Asio and Beast stay out of this header

 private:
  TransportOptions options_;
  TransportCounters counters_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dype::rt::daemon
