#include "runtime/daemon/http/http_transport.h"

#include <chrono>
#include <optional>

#include <openssl/ssl.h>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "runtime/daemon/http/http_session.h"

namespace dype::rt::daemon {

struct HttpTransport::Impl {
  struct Listener {
    tcp::acceptor acceptor;
    asio::steady_timer retry;  // after an accept error (out of descriptors): try again shortly
    const HttpRouter& router;
    std::unique_ptr<asio::ssl::context> tls;  // HTTPS: the server's certificate and key
  };

  Impl(HttpTransport& t, ErrorBody error_body, std::function<void(int)> on_refused)
      : error_body(std::move(error_body)),
        on_refused(std::move(on_refused)),
        bodies(static_cast<std::size_t>(std::max(1, t.options_.workers))),
        workers(static_cast<std::size_t>(std::max(1, t.options_.workers))),
        shared{t.options_, t.counters_, workers, bodies, this->error_body, this->on_refused, {}, {}, 0, {}} {}

  void accept(Listener& l);
  void refuse_connection(tcp::socket& socket, bool tls);

  // Declared in destruction order's reverse: sessions (held by handlers inside `ioc`) refer to
  // `shared`, `bodies` and `workers`, so those outlive the io_context.
  ErrorBody error_body;
  std::function<void(int)> on_refused;
  BodyPool bodies;
  asio::thread_pool workers;
  SessionShared shared;
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::vector<std::unique_ptr<Listener>> listeners;
  std::vector<std::thread> threads;
  bool stopped = false;
};

HttpTransport::HttpTransport(TransportOptions options, ErrorBody error_body, std::function<void(int)> on_refused)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(*this, std::move(error_body), std::move(on_refused))) {}

HttpTransport::~HttpTransport() { stop(); }

namespace {

// TLS 1.2 or later, the identity's certificate chain and key.
std::unique_ptr<asio::ssl::context> tls_context(const TlsIdentity& id) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                   asio::ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  beast::error_code ec;
  ctx->use_certificate_chain(asio::buffer(id.cert_chain_pem), ec);
  if (ec) throw InputError("--tls-cert", "certificate chain refused by OpenSSL: " + ec.message());
  ctx->use_private_key(asio::buffer(id.private_key_pem), asio::ssl::context::pem, ec);
  if (ec) throw InputError("--tls-key", "private key refused by OpenSSL: " + ec.message());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    throw InputError("--tls-key", "not the private key of the --tls-cert certificate");
  return ctx;
}

}  // namespace

int HttpTransport::listen(const std::string& host, int port, const HttpRouter& router, const TlsIdentity* tls) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": not an IP address");
  auto l = std::make_unique<Impl::Listener>(
      Impl::Listener{tcp::acceptor(impl_->ioc), asio::steady_timer(impl_->ioc), router, nullptr});
  if (tls) l->tls = tls_context(*tls);
  const tcp::endpoint ep(address, static_cast<unsigned short>(port));
  l->acceptor.open(ep.protocol(), ec);
  if (!ec) l->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) l->acceptor.bind(ep, ec);
  if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  const int bound = l->acceptor.local_endpoint().port();
  impl_->listeners.push_back(std::move(l));
  return bound;
}

void HttpTransport::start() {
  impl_->guard.emplace(impl_->ioc.get_executor());
  for (auto& l : impl_->listeners) impl_->accept(*l);
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

void HttpTransport::Impl::accept(Listener& l) {
  l.acceptor.async_accept(asio::make_strand(ioc), [this, &l](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !l.acceptor.is_open()) return;
    if (ec) {
      spdlog::warn("HTTP accept failed: {} (retrying in 50 ms)", ec.message());
      l.retry.expires_after(std::chrono::milliseconds(50));
      l.retry.async_wait([this, &l](beast::error_code) {
        if (l.acceptor.is_open()) accept(l);
      });
      return;
    }
    if (shared.counters.open.load() >= shared.options.max_connections) {
      refuse_connection(socket, l.tls != nullptr);
    } else {
      ++shared.counters.connections_accepted;
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      if (l.tls) std::make_shared<HttpSession<TlsStream>>(std::move(socket), l.tls.get(), shared, l.router)->start();
      else std::make_shared<HttpSession<PlainStream>>(std::move(socket), nullptr, shared, l.router)->start();
    }
    accept(l);
  });
}

// Beyond the connection cap: a 503 written if the socket takes it at once, then closed (HTTPS:
// closed before the handshake, which a 503 would need).
void HttpTransport::Impl::refuse_connection(tcp::socket& socket, bool tls) {
  ++shared.counters.connections_refused;
  if (on_refused) on_refused(503);
  beast::error_code ignored;
  if (tls) {
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    return;
  }
  HttpResponse res;
  error_body(res, 503, "too many open connections (--max-connections " +
                           std::to_string(shared.options.max_connections) + "); retry later");
  const std::string text = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + res.content_type +
                           "\r\nContent-Length: " + std::to_string(res.body.size()) +
                           "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + res.body;
  socket.non_blocking(true, ignored);
  socket.write_some(asio::buffer(text), ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void HttpTransport::close_listeners() {
  for (auto& l : impl_->listeners) {
    asio::post(impl_->ioc, [l = l.get()] {
      beast::error_code ignored;
      l->acceptor.close(ignored);
      l->retry.cancel();
    });
  }
}

void HttpTransport::close_all() {
  std::vector<std::shared_ptr<OpenConnection>> open;
  {
    std::lock_guard lock(impl_->shared.mutex);
    for (auto& [p, weak] : impl_->shared.sessions)
      if (auto s = weak.lock()) open.push_back(std::move(s));
  }
  for (auto& s : open) s->close();
}

void HttpTransport::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  close_listeners();
  close_all();
  // Requests taken by inline handlers are answered when the engine completes them (the I/O
  // threads still run, to encode those answers), and handlers still running on the workers finish
  // (they may wait on the engine); their answers find the connection closed.
  {
    std::unique_lock lock(impl_->shared.mutex);
    impl_->shared.replies_done.wait(lock, [this] { return impl_->shared.replies == 0; });
  }
  impl_->workers.join();
  impl_->guard.reset();
  close_all();  // any connection a late handler's answer kept open
  // Let the closes run (each session ends once its aborted operations complete), then stop.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (counters_.open.load() > 0 && !impl_->threads.empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace dype::rt::daemon
