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

#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/admission.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/http/http_router.h"
#include "runtime/daemon/http/http_transport.h"
#include "runtime/daemon/metrics.h"
#include "runtime/daemon/service.h"
#include "runtime/daemon/http/server_options.h"
#include "runtime/daemon/shm/shared_memory_registry.h"
#include "runtime/daemon/http/tls.h"

namespace dype::rt::daemon {

class HttpRoutes;


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
  // The shared-memory regions, shared with the gRPC front end (off unless allow_client_shm).
  SharedMemoryRegistry& shared_memory() { return *shm_; }

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
  std::unique_ptr<SharedMemoryRegistry> shm_;
  std::unique_ptr<HttpRoutes> routes_;  // refers to options_, admission_ and admin_ above
};

}  // namespace dype::rt::daemon
