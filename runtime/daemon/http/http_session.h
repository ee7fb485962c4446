#pragma once
// One HTTP connection of HttpTransport (internal to http_transport.cpp and http_session.cpp): a
// state machine on the connection's strand. wait (idle timeout) -> header (header timeout, limits)
// -> framing checks -> body (body timeout, straight into a pooled buffer) -> handler (inline or on
// the worker pool; or taken by a route's inline handler and answered later through an HttpReply)
// -> write (one gather-write) -> wait again. Any refusal answers and closes.
// The session is a template on its stream: beast::tcp_stream for plain HTTP, and
// beast::ssl_stream<beast::tcp_stream> for HTTPS, whose TLS handshake comes first, under the header
// timeout. Both are compiled once, in http_session.cpp; the plain one is the code it always was.
#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "runtime/daemon/http/body_buffer.h"
#include "runtime/daemon/http/http_message.h"
#include "runtime/daemon/http/http_router.h"
#include "runtime/daemon/http/transport_options.h"

namespace dype::rt::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// What the transport's registry of open connections knows of a session, whatever its stream.
class OpenConnection {
 public:
  // Closes the socket from any thread (on the strand): pending reads and writes end.
  virtual void close() = 0;

 protected:
  ~OpenConnection() = default;
};

// What every connection of one transport shares.
struct SessionShared {
  const TransportOptions& options;
  TransportCounters& counters;
  asio::thread_pool& workers;
  BodyPool& bodies;
  const TransportErrorBody& error_body;
  const std::function<void(int)>& on_refused;
  std::mutex mutex;  // guards `sessions` and `replies`
  std::unordered_map<const OpenConnection*, std::weak_ptr<OpenConnection>> sessions;
  // HttpReplies alive (taken by inline handlers, held by the engine's completions): stop() waits
  // until none is left, so no completion posts onto a strand once the I/O threads are stopped.
  std::size_t replies = 0;
  std::condition_variable replies_done;

  void reply_opened() {
    std::lock_guard lock(mutex);
    ++replies;
  }
  void reply_closed() {
    std::lock_guard lock(mutex);
    if (--replies == 0) replies_done.notify_all();
  }
};

template <class Stream>
class HttpSession final : public OpenConnection, public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  // `tls`: the server's TLS context, for TlsStream (nullptr for PlainStream).
  HttpSession(tcp::socket socket, asio::ssl::context* tls, SessionShared& shared, const HttpRouter& router);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void start();
  void close() override;

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  void handshake();
  void wait_request();
  void read_header();
  void on_header(beast::error_code ec);
  // The framing rules before any body byte is read; false when it refused the request.
  bool check_framing();
  void read_body();
  void read_body_rest();
  void read_chunked_body();
  void body_done();
  void run_handler();
  // The route's inline handler first; false when it declined (run the handler on a worker).
  bool try_inline(const HttpRouter::Route& route);
  void arm_deadline(std::uint64_t answer, std::chrono::steady_clock::time_point deadline, std::function<void()> work);
  void call(const HttpRouter::Route& route, HttpResponse& res) noexcept;
  void answer(HttpResponse res);
  void refuse(int status, const std::string& message);
  void on_written(beast::error_code ec);
  void linger();
  void drain();
  void shut();

  class Reply;

  Stream stream_;
  asio::steady_timer deadline_;  // a taken request's deadline (HttpReply::expire_at)
  std::uint64_t answers_ = 0;    // answers written so far: a deadline armed for an earlier one is stale
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> parser_;
  std::optional<bhttp::request_parser<bhttp::string_body>> chunked_;
  SessionShared& shared_;
  const HttpRouter& router_;

  HttpRequest req_;
  std::string peer_;  // the client's address, for the graph registry's per-client quotas
  std::shared_ptr<BodyBuffer> body_;
  std::size_t pad_ = 0, length_ = 0, body_read_ = 0;
  std::size_t lingered_ = 0;
  bool keep_alive_ = true, head_only_ = false, closing_ = false, closed_ = false;
  HttpResponse res_;  // being written
  std::string head_;  // its status line and headers
  std::array<asio::const_buffer, 3> parts_;  // head_, the body, the tail: one gather-write
};

extern template class HttpSession<PlainStream>;
extern template class HttpSession<TlsStream>;

}  // namespace dype::rt::daemon
