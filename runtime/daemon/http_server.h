#pragma once
// The HTTP front end: Open Inference Protocol (KServe v2) REST routes, dype's graph registration
// and admin routes, and Prometheus metrics on their own port, over one event-driven transport
// (http_transport.h: Boost.Beast on Asio, connection cap, timeouts, strict framing). This class
// owns the transport and the two route tables; the routes are http_routes.h (one named handler
// each; the infer route in http_infer.cpp), errors map to statuses through errors.h's one table.
//
//   HttpServer http(service, graphs, metrics, {.http_port = 0, .metrics_port = 0});
//   http.start();                       // binds (ephemeral ports when 0) and serves in the background
//   ... http.http_port() ...
//   http.begin_shutdown();              // ready -> false, new requests -> 503, in-flight finish
//   http.wait_idle(30.0); http.stop();  // then every connection is closed, whatever its state
//
// With options.tls the HTTP port speaks HTTPS (TLS 1.2+) only. The metrics port stays plain HTTP:
// it carries counters and plan names, no tensors or tokens, and Prometheus scrapes it as it is.
//
// Routes: GET /v2/health/live, /v2/health/ready, /v2, /v2/models/{m}[/versions/{v}],
// /v2/models/{m}[/versions/{v}]/ready; POST /v2/models/{m}[/versions/{v}]/infer;
// POST /v2/dype/graphs, DELETE /v2/dype/graphs/{id}; admin under /v2/dype/admin/ (Bearer token):
// GET plan[?model=], POST mode {"mode"}, GET pareto[?model=], GET devices,
// POST devices/{d}/drain|undrain, POST bitstreams/load {"device","path"}, POST bitstreams/unload {"device"}.
// Errors are {"error": "..."}: 400 bad input, 401 bad token, 404 unknown model/graph/device, 409 an
// admin change failed and was rolled back, 411 a body without a length, 413 body too large, 415 a
// compressed body, 429 admission queue full, 431 headers too large or too many, 501 not
// supported, 503 shutting down or too many connections, 500 otherwise.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/daemon/admin.h"
#include "runtime/daemon/admission.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/http_router.h"
#include "runtime/daemon/http_transport.h"
#include "runtime/daemon/metrics.h"
#include "runtime/daemon/service.h"
#include "runtime/daemon/tls.h"

namespace dype::rt::daemon {

class HttpRoutes;

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
  std::string infer_token;                     // non-empty: infer and graph routes need it (401)
  std::string bitstream_dir;                   // admin bitstream paths must resolve inside it
  std::string state_dir;                       // operator state kept across restarts (empty: not kept)
  std::optional<TlsIdentity> tls;              // set: the HTTP port speaks HTTPS only (metrics stay plain)
};

class HttpServer {
 public:
  HttpServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, ServerOptions options,
             AdminHooks hooks = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds both ports (Error naming host:port when it cannot) and serves in background threads.
  void start();
  int http_port() const { return http_port_; }
  int metrics_port() const { return metrics_port_; }
  bool ready() const { return admission_.ready(); }
  // Shared with the gRPC front end so both count against one queue and stop together.
  AdmissionControl& admission() { return admission_; }
  // Shared with the gRPC front end's admin service (one token, one call at a time).
  AdminApi& admin() { return admin_; }

  void begin_shutdown();
  // True when every admitted request was answered within timeout_s.
  bool wait_idle(double timeout_s);
  void stop();

  const TransportCounters& transport_counters() const { return transport_->counters(); }

  // Resolves `path` inside the bitstream dir (InputError when it escapes or does not exist).
  std::string confine_bitstream_path(const std::string& path) const { return admin_.confine_bitstream_path(path); }

 private:
  ServerOptions options_;
  std::unique_ptr<HttpTransport> transport_;
  HttpRouter api_routes_, metrics_routes_;
  int http_port_ = -1, metrics_port_ = -1;
  AdmissionControl admission_;
  AdminApi admin_;
  std::unique_ptr<HttpRoutes> routes_;  // refers to options_, admission_ and admin_ above
};

}  // namespace dype::rt::daemon
