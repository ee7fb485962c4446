#pragma once
// The HTTP server's options (dype-serve's flags), shared by the server and its routes.
#include <cstddef>
#include <optional>
#include <string>

namespace dype::rt::daemon {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int http_port = 8000;                        // 0: ephemeral
  int metrics_port = 8002;                     // 0: ephemeral, -1: off
  std::size_t max_request_bytes = 256u << 20;  // larger bodies get 413
  std::size_t max_response_bytes = 256u << 20; // an infer response's JSON (outputs as JSON data) beyond this: 413
  std::size_t max_queue = 64;                  // admitted infer requests at once; more get 429
  int threads = 32;                            // HTTP worker threads (handlers that may block)
  int io_threads = 2;                          // threads reading and writing every connection
  // Binary infer requests (Inference-Header-Content-Length) of at most this many body bytes, all
  // outputs binary, are parsed and handed to the engine on the I/O thread and answered from its
  // completion, without a worker; larger ones (parsing, the x copy and graph checks take longer)
  // and every other request run on a worker. 0: every infer request on a worker.
  std::size_t inline_infer_max_bytes = 1u << 20;
  std::size_t max_connections = 4096;          // open at once; more get 503
  double idle_timeout_s = 60.0;                // a keep-alive connection idle this long is closed
  double header_timeout_s = 10.0;              // request line and headers must arrive within this
  double body_timeout_s = 60.0;                // the body must arrive (the response be taken) within this
  std::string admin_token;                     // empty: admin API refuses every call (401)
  bool allow_client_shm = false;               // the shared-memory extensions (--allow-client-shm)
  std::string infer_token;                     // non-empty: infer and graph routes need it (401)
  std::string ui_token;                        // non-empty: GET /v2/dype/status needs it (401)
  std::string bitstream_dir;                   // admin bitstream paths must resolve inside it
  std::string state_dir;                       // operator state kept across restarts (empty: not kept)
  std::optional<TlsIdentity> tls;              // set: the HTTP port speaks HTTPS only (metrics stay plain)
};

}  // namespace dype::rt::daemon
