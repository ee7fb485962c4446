#include "runtime/daemon/http/http_server.h"

#include "runtime/daemon/errors.h"
#include "runtime/daemon/http/http_answer.h"
#include "runtime/daemon/http/http_routes.h"

namespace dype::rt::daemon {

HttpServer::HttpServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, ServerOptions options,
                       AdminHooks hooks)
    : options_(std::move(options)),
      admission_(options_.max_queue, metrics),
      admin_(service, std::move(hooks), options_.admin_token, options_.bitstream_dir),
      shm_(std::make_unique<SharedMemoryRegistry>(options_.allow_client_shm)),
      routes_(std::make_unique<HttpRoutes>(service, graphs, metrics, options_, admission_, admin_)) {
  routes_->set_shared_memory(shm_.get());
  if (!options_.state_dir.empty()) admin_.keep_state_in(std::make_shared<OperatorStateFile>(options_.state_dir));
  const TransportOptions t{.io_threads = options_.io_threads,
                           .workers = options_.threads,
                           .max_connections = options_.max_connections,
                           .max_request_bytes = options_.max_request_bytes,
                           .idle_timeout_s = options_.idle_timeout_s,
                           .header_timeout_s = options_.header_timeout_s,
                           .body_timeout_s = options_.body_timeout_s};
  transport_ = std::make_unique<HttpTransport>(
      t, [](HttpResponse& res, int status, const std::string& message) { send_error(res, status, message); },
      [&metrics](int status) {
        if (status == 413) metrics.record("", "too_large", 0.0);
        if (status == 503) metrics.record("", "unavailable", 0.0);
      });
  routes_->set_transport(transport_.get());
  routes_->add_to(api_routes_);
  routes_->add_metrics_to(metrics_routes_);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  http_port_ = transport_->listen(options_.host, options_.http_port, api_routes_, options_.tls ? &*options_.tls : nullptr);
  if (options_.metrics_port >= 0) metrics_port_ = transport_->listen(options_.host, options_.metrics_port, metrics_routes_);
  transport_->start();
}

void HttpServer::begin_shutdown() { admission_.begin_shutdown(); }

bool HttpServer::wait_idle(double timeout_s) { return admission_.wait_idle(timeout_s); }

void HttpServer::stop() {
  admission_.begin_shutdown();
  if (transport_) transport_->stop();
}

}  // namespace dype::rt::daemon
