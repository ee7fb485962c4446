#include "runtime/daemon/http_server.h"

#include <chrono>
#include <memory>


#include <httplib.h>

#include "runtime/daemon/errors.h"
#include "runtime/daemon/http_routes.h"

namespace dype::rt::daemon {
namespace {

constexpr std::size_t kKeepAliveRequests = 100000;

}  // namespace

HttpServer::HttpServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, ServerOptions options,
                       AdminHooks hooks)
    : options_(std::move(options)),
      admission_(options_.max_queue, metrics),
      admin_(service, std::move(hooks), options_.admin_token, options_.bitstream_dir),
      routes_(std::make_unique<HttpRoutes>(service, graphs, metrics, options_, admission_, admin_)) {
  if (!options_.state_dir.empty()) admin_.keep_state_in(std::make_shared<OperatorStateFile>(options_.state_dir));
  http_ = std::make_unique<httplib::Server>();
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  http_->set_payload_max_length(options_.max_request_bytes);
  // Without TCP_NODELAY a response written as headers then body waits on the client's delayed
  // ACK (Nagle), adding milliseconds to every keep-alive request.
  http_->set_tcp_nodelay(true);
  // httplib closes a keep-alive connection after 5 requests by default: every client then pays a
  // reconnect, and each new TCP connection starts again with a small receive window, so 400 KB
  // bodies crawl in until it has grown. Idle connections still close after httplib's 5 s.
  http_->set_keep_alive_max_count(kKeepAliveRequests);
  routes_->add_to(*http_);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  auto bind = [this](httplib::Server& s, int port) {
    const int p = port == 0 ? s.bind_to_any_port(options_.host) : (s.bind_to_port(options_.host, port) ? port : -1);
    if (p < 0) throw Error("cannot listen on " + options_.host + ":" + std::to_string(port));
    return p;
  };
  // httplib's stop() does nothing until the listen loop is running, so a stop() right after
  // start() would leave the thread blocked in accept() forever: return once it runs.
  auto wait_running = [](const httplib::Server& s) {
    for (int i = 0; i < 10000 && !s.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  http_port_ = bind(*http_, options_.http_port);
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  wait_running(*http_);
  if (options_.metrics_port >= 0) {
    metrics_http_ = std::make_unique<httplib::Server>();
    metrics_http_->new_task_queue = [] { return new httplib::ThreadPool(2); };
    routes_->add_metrics_to(*metrics_http_);
    metrics_port_ = bind(*metrics_http_, options_.metrics_port);
    metrics_thread_ = std::thread([this] { metrics_http_->listen_after_bind(); });
    wait_running(*metrics_http_);
  }
}

void HttpServer::begin_shutdown() { admission_.begin_shutdown(); }

bool HttpServer::wait_idle(double timeout_s) { return admission_.wait_idle(timeout_s); }

void HttpServer::stop() {
  admission_.begin_shutdown();
  if (http_) http_->stop();
  if (metrics_http_) metrics_http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  if (metrics_thread_.joinable()) metrics_thread_.join();
}

}  // namespace dype::rt::daemon
