#pragma once
// What the HTTP transport is told (limits and timeouts), what it counts, and how it writes an
// error body: shared by HttpTransport and its sessions.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/daemon/http/http_message.h"

namespace dype::rt::daemon {

struct TransportOptions {
  int io_threads = 2;
  int workers = 32;                            // threads for RunOn::worker handlers
  std::size_t max_connections = 4096;          // open at once; more get 503
  std::size_t max_request_bytes = 256u << 20;  // larger bodies get 413
  std::size_t max_header_bytes = 16u << 10;    // request line + headers; more get 431
  std::size_t max_header_fields = 100;         // more get 431
  double idle_timeout_s = 60.0;                // between keep-alive requests
  double header_timeout_s = 10.0;              // from a request's first byte to its last header
  double body_timeout_s = 60.0;                // for the whole body (and for writing the response)
};

// Counts the transport's own refusals and closes (exposed in /metrics by the server).
struct TransportCounters {
  std::atomic<std::uint64_t> connections_accepted{0}, connections_refused{0}, timeouts{0}, bad_requests{0};
  std::atomic<std::uint64_t> tls_handshake_failures{0};  // HTTPS listeners: handshakes that failed (not timed out)
  std::atomic<std::size_t> open{0};
};

// Fills an error response (status and message) in the server's error format.
using TransportErrorBody = std::function<void(HttpResponse&, int status, const std::string& message)>;

}  // namespace dype::rt::daemon
