#include "runtime/daemon/http/http_session.h"

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace dype::rt::daemon {
namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

bool has_body_method(std::string_view m) { return m == "POST" || m == "PUT" || m == "PATCH"; }

// The Inference-Header-Content-Length value when it is a number (checked properly when parsed).
std::optional<std::size_t> json_header_length(const HttpRequest& req) {
  const std::string v = req.get_header_value("Inference-Header-Content-Length");
  std::size_t n = 0;
  if (!v.empty() && std::from_chars(v.data(), v.data() + v.size(), n).ec == std::errc()) return n;
  return std::nullopt;
}

// Sizes `b` for a body of `length` and pads its start so the binary section (after the JSON header)
// lands on a 64-byte boundary, where INT64/FP32 tensors can be read in place; returns the padding.
// kBodyPaddingBytes more stay free after the body, so its JSON is parsed where it lies.
std::size_t make_room(BodyBuffer& b, std::size_t length, std::optional<std::size_t> header_length) {
  b.reset(length + 64 + kBodyPaddingBytes);
  const auto start = reinterpret_cast<std::uintptr_t>(b.data()) + header_length.value_or(0);
  const std::size_t pad = (64 - start % 64) % 64;
  b.extend_to(pad);
  return pad;
}

const char* reason_phrase(int status) {
  const auto s = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return s.empty() ? "Unknown" : s.data();
}

template <class Stream>
Stream make_stream(tcp::socket socket, asio::ssl::context* tls) {
  if constexpr (std::is_same_v<Stream, TlsStream>) return Stream(std::move(socket), *tls);
  else return Stream(std::move(socket));
}

constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
// Bytes a refused request may still send before its connection is closed (a body up to 2 s away).
constexpr std::size_t kLingerBytes = 512u << 20;

}  // namespace

template <class Stream>
HttpSession<Stream>::HttpSession(tcp::socket socket, asio::ssl::context* tls, SessionShared& shared,
                                 const HttpRouter& router)
    : stream_(make_stream<Stream>(std::move(socket), tls)),
      deadline_(stream_.get_executor()),
      shared_(shared),
      router_(router) {
  boost::system::error_code ec;
  const auto remote = lowest().socket().remote_endpoint(ec);
  if (!ec) peer_ = remote.address().to_string();
  ++shared_.counters.open;
}

template <class Stream>
HttpSession<Stream>::~HttpSession() {
  shared_.bodies.release(std::move(body_));
  {
    std::lock_guard lock(shared_.mutex);
    shared_.sessions.erase(this);
  }
  --shared_.counters.open;
}

template <class Stream>
void HttpSession<Stream>::start() {
  {
    std::lock_guard lock(shared_.mutex);
    shared_.sessions.emplace(this, this->weak_from_this());
  }
  asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
    if constexpr (kTls) self->handshake();
    else self->wait_request();
  });
}

// HTTPS: the TLS handshake first, under the header timeout (a client that connects and never
// finishes it is closed like a slow one). A failed handshake (plain HTTP sent to this port, a
// client that does not trust the certificate) is counted and closed; other connections go on.
template <class Stream>
void HttpSession<Stream>::handshake() {
  if constexpr (kTls) {
    lowest().expires_after(seconds(shared_.options.header_timeout_s));
    stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) {
        if (ec == beast::error::timeout) ++self->shared_.counters.timeouts;
        else if (!self->closed_) ++self->shared_.counters.tls_handshake_failures;
        return self->shut();
      }
      self->wait_request();
    });
  }
}

template <class Stream>
void HttpSession<Stream>::close() {
  asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->shut(); });
}

template <class Stream>
void HttpSession<Stream>::shut() {
  if (closed_) return;
  closed_ = true;
  deadline_.cancel();  // drops what a taken request's deadline holds (its reply, hence this session)
  beast::error_code ignored;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  lowest().close();
}

// Between requests: wait for the next one's first bytes under the idle timeout (a request already
// buffered, pipelined, is read at once).
template <class Stream>
void HttpSession<Stream>::wait_request() {
  if (closed_) return;
  if (buffer_.size() > 0) return read_header();
  lowest().expires_after(seconds(shared_.options.idle_timeout_s));
  stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
    if (ec) {
      if (ec == beast::error::timeout) ++self->shared_.counters.timeouts;
      return self->shut();
    }
    self->buffer_.commit(n);
    self->read_header();
  });
}

template <class Stream>
void HttpSession<Stream>::read_header() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(shared_.options.max_header_bytes));
  // A Content-Length over the limit is refused in check_framing(), with its own message. (Not
  // boost::none: Boost 1.74 compares the length against an empty optional as 'over the limit'.)
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  lowest().expires_after(seconds(shared_.options.header_timeout_s));
  bhttp::async_read_header(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
    self->on_header(ec);
  });
}

template <class Stream>
void HttpSession<Stream>::on_header(beast::error_code ec) {
  if (ec == beast::error::timeout) {
    // The timer closed the socket: nothing can be answered.
    ++shared_.counters.timeouts;
    return shut();
  }
  if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
      ec == asio::error::connection_reset || closed_)
    return shut();
  if (ec == bhttp::error::header_limit)
    return refuse(431, "request line and headers exceed " + std::to_string(shared_.options.max_header_bytes) + " bytes");
  if (ec == bhttp::error::bad_content_length)
    return refuse(400, "Content-Length: malformed, sent more than once with different values, or sent with "
                       "Transfer-Encoding");
  if (ec) return refuse(400, "malformed HTTP request: " + ec.message());

  const auto& h = parser_->get();
  req_ = HttpRequest{};
  req_.arrival = std::chrono::steady_clock::now();
  req_.peer = peer_;
  req_.method = std::string(h.method_string());
  req_.target = std::string(h.target());
  for (const auto& f : h) req_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  keep_alive_ = parser_->keep_alive();
  head_only_ = req_.method == "HEAD";
  if (check_framing()) read_body();
}

template <class Stream>
bool HttpSession<Stream>::check_framing() {
  const TransportOptions& o = shared_.options;
  if (req_.headers.size() > o.max_header_fields) {
    refuse(431, std::to_string(req_.headers.size()) + " header fields (at most " + std::to_string(o.max_header_fields) +
                    ")");
    return false;
  }
  if (!split_target(req_.target, req_.path, req_.params)) {
    refuse(400, "request target: malformed percent-escape in '" + req_.target + "'");
    return false;
  }
  if (req_.has_header("Transfer-Encoding") && !parser_->chunked()) {
    refuse(400, "Transfer-Encoding: only 'chunked' (last) is supported");
    return false;
  }
  const std::string encoding = req_.get_header_value("Content-Encoding");
  if (!encoding.empty() && !iequals(encoding, "identity")) {
    refuse(415, "Content-Encoding: '" + encoding + "' is not supported; send the body uncompressed");
    return false;
  }
  const auto length = parser_->content_length();
  if (has_body_method(req_.method) && !length && !parser_->chunked()) {
    refuse(411, "Content-Length: required (or Transfer-Encoding: chunked)");
    return false;
  }
  if (length && *length > o.max_request_bytes) {
    if (shared_.on_refused) shared_.on_refused(413);
    refuse(413, "request body exceeds --max-request-bytes (" + std::to_string(o.max_request_bytes) + " bytes)");
    return false;
  }
  length_ = length ? static_cast<std::size_t>(*length) : 0;
  return true;
}

template <class Stream>
void HttpSession<Stream>::read_body() {
  const bool chunked = parser_->chunked();
  const bool expects = iequals(req_.get_header_value("Expect"), "100-continue") && (length_ > 0 || chunked);
  auto go = [self = this->shared_from_this(), chunked] {
    if (chunked) return self->read_chunked_body();
    if (self->length_ == 0) return self->body_done();
    if (!self->body_) self->body_ = self->shared_.bodies.acquire();
    BodyBuffer& b = *self->body_;
    self->pad_ = make_room(b, self->length_, json_header_length(self->req_));
    // Bytes read along with the headers first, then the rest straight from the socket.
    const std::size_t have = std::min(self->buffer_.size(), self->length_);
    b.append(static_cast<const char*>(self->buffer_.data().data()), have);
    self->buffer_.consume(have);
    if (have == self->length_) return self->body_done();
    b.extend_to(self->pad_ + self->length_);
    self->lowest().expires_after(seconds(self->shared_.options.body_timeout_s));
    self->body_read_ = have;
    self->read_body_rest();
  };
  if (!expects) return go();
  lowest().expires_after(seconds(shared_.options.body_timeout_s));
  asio::async_write(stream_, asio::buffer(kContinue, sizeof kContinue - 1),
                    [self = this->shared_from_this(), go](beast::error_code ec, std::size_t) {
                      if (ec) return self->shut();
                      go();
                    });
}

// The rest of a Content-Length body, each read asking for everything still missing (asio::
// async_read would split it into 64 KiB reads, each its own completion: measured ~20 us more per
// 256 KB body).
template <class Stream>
void HttpSession<Stream>::read_body_rest() {
  char* dst = body_->data() + pad_ + body_read_;
  stream_.async_read_some(asio::buffer(dst, length_ - body_read_),
                          [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                            if (ec) {
                              if (ec == beast::error::timeout) ++self->shared_.counters.timeouts;
                              return self->shut();
                            }
                            self->body_read_ += n;
                            if (self->body_read_ < self->length_) return self->read_body_rest();
                            self->body_done();
                          });
}

template <class Stream>
void HttpSession<Stream>::read_chunked_body() {
  chunked_.emplace(std::move(*parser_));
  chunked_->body_limit(shared_.options.max_request_bytes);
  lowest().expires_after(seconds(shared_.options.body_timeout_s));
  bhttp::async_read(stream_, buffer_, *chunked_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec == bhttp::error::body_limit) {
      if (self->shared_.on_refused) self->shared_.on_refused(413);
      return self->refuse(413, "request body exceeds --max-request-bytes (" +
                                   std::to_string(self->shared_.options.max_request_bytes) + " bytes)");
    }
    if (ec == beast::error::timeout) ++self->shared_.counters.timeouts;
    if (ec == beast::error::timeout || ec == bhttp::error::end_of_stream || ec == asio::error::eof) return self->shut();
    if (ec) return self->refuse(400, "malformed chunked body: " + ec.message());
    const std::string& text = self->chunked_->get().body();
    if (!self->body_) self->body_ = self->shared_.bodies.acquire();
    self->length_ = text.size();
    self->pad_ = make_room(*self->body_, text.size(), json_header_length(self->req_));
    self->body_->append(text.data(), text.size());
    self->chunked_.reset();
    self->body_done();
  });
}

template <class Stream>
void HttpSession<Stream>::body_done() {
  req_.received = std::chrono::steady_clock::now();
  req_.body = length_ == 0 ? std::string_view{} : std::string_view(body_->data() + pad_, length_);
  req_.body_owner = length_ == 0 ? nullptr : std::shared_ptr<const void>(body_, body_->data());
  req_.body_readable_past_end = length_ == 0 ? 0 : body_->capacity() - pad_ - length_;
  run_handler();
}

template <class Stream>
void HttpSession<Stream>::call(const HttpRouter::Route& route, HttpResponse& res) noexcept {
  try {
    route.handler(req_, res);
  } catch (const std::exception& e) {
    res = HttpResponse{};
    shared_.error_body(res, 500, e.what());
  } catch (...) {
    res = HttpResponse{};
    shared_.error_body(res, 500, "unknown error");
  }
}

// What a route's inline handler answers through. It holds the session, and counts in
// SessionShared::replies until destroyed: the transport's stop() waits for every reply to be let
// go (sent, and the engine's completion run) before it stops the I/O threads.
template <class Stream>
class HttpSession<Stream>::Reply final : public HttpReply {
 public:
  explicit Reply(std::shared_ptr<HttpSession> s) : s_(std::move(s)), answer_(s_->answers_) { s_->shared_.reply_opened(); }
  ~Reply() override {
    SessionShared& shared = s_->shared_;
    s_.reset();  // the session may end here: before stop() can go on and take `shared` away
    shared.reply_closed();
  }
  void send(HttpResponse res) override {
    if (sent_.exchange(true)) return;
    asio::dispatch(s_->stream_.get_executor(), [s = s_, res = std::move(res)]() mutable { s->answer(std::move(res)); });
  }
  void post_io(std::function<void()> work) override { asio::post(s_->stream_.get_executor(), std::move(work)); }
  void post_worker(std::function<void()> work) override { asio::post(s_->shared_.workers, std::move(work)); }
  void expire_at(std::chrono::steady_clock::time_point deadline, std::function<void()> work) override {
    asio::dispatch(s_->stream_.get_executor(), [s = s_, n = answer_, deadline, work = std::move(work)]() mutable {
      s->arm_deadline(n, deadline, std::move(work));
    });
  }

 private:
  std::shared_ptr<HttpSession> s_;
  const std::uint64_t answer_;  // the session's answer count when the request was taken
  std::atomic<bool> sent_{false};
};

template <class Stream>
void HttpSession<Stream>::arm_deadline(std::uint64_t answer, std::chrono::steady_clock::time_point deadline,
                                       std::function<void()> work) {
  if (answer != answers_) return;  // already answered
  deadline_.expires_at(deadline);
  deadline_.async_wait([self = this->shared_from_this(), answer, work = std::move(work)](beast::error_code ec) {
    if (!ec && answer == self->answers_) work();
  });
}

template <class Stream>
bool HttpSession<Stream>::try_inline(const HttpRouter::Route& route) {
  auto reply = std::make_shared<Reply>(this->shared_from_this());
  try {
    return route.try_inline(req_, reply);
  } catch (const std::exception& e) {
    HttpResponse res;
    shared_.error_body(res, 500, e.what());
    reply->send(std::move(res));  // ignored when the handler had answered already
  } catch (...) {
    HttpResponse res;
    shared_.error_body(res, 500, "unknown error");
    reply->send(std::move(res));
  }
  return true;
}

template <class Stream>
void HttpSession<Stream>::run_handler() {
  bool path_known = false;
  const HttpRouter::Route* route = router_.match(req_, path_known);
  if (!route) {
    HttpResponse res;
    if (path_known) {
      shared_.error_body(res, 405, "method " + req_.method + " not allowed on " + req_.path);
      res.set_header("Allow", router_.allowed_methods(req_.path));
    } else {
      shared_.error_body(res, 404, "no such route");
    }
    return answer(std::move(res));
  }
  if (route->run_on == RunOn::io) {
    HttpResponse res;
    call(*route, res);
    return answer(std::move(res));
  }
  if (route->try_inline && try_inline(*route)) return;
  asio::post(shared_.workers, [self = this->shared_from_this(), route] {
    HttpResponse res;
    self->call(*route, res);
    asio::post(self->stream_.get_executor(),
               [self, res = std::move(res)]() mutable { self->answer(std::move(res)); });
  });
}

template <class Stream>
void HttpSession<Stream>::refuse(int status, const std::string& message) {
  ++shared_.counters.bad_requests;
  HttpResponse res;
  shared_.error_body(res, status, message);
  res.close = true;  // the body, if any, was not read: the connection cannot be reused
  answer(std::move(res));
}

template <class Stream>
void HttpSession<Stream>::answer(HttpResponse res) {
  ++answers_;
  deadline_.cancel();
  if (closed_) return;
  res_ = std::move(res);
  for (const auto& [k, v] : res_.headers)
    if (iequals(k, "Connection") && iequals(v, "close")) res_.close = true;
  closing_ = res_.close || !keep_alive_;
  const std::size_t length = res_.body.size() + res_.tail.size();
  head_.clear();
  head_ += "HTTP/1.1 ";
  head_ += std::to_string(res_.status);
  head_ += ' ';
  head_ += reason_phrase(res_.status);
  head_ += "\r\nContent-Length: ";
  head_ += std::to_string(length);
  if (!res_.content_type.empty()) head_ += "\r\nContent-Type: " + res_.content_type;
  for (const auto& [k, v] : res_.headers) {
    if (iequals(k, "Connection") || iequals(k, "Content-Length")) continue;
    head_ += "\r\n" + k + ": " + v;
  }
  head_ += closing_ ? "\r\nConnection: close\r\n\r\n" : "\r\nConnection: keep-alive\r\n\r\n";
  parts_ = {asio::buffer(head_), asio::buffer(res_.body), asio::buffer(res_.tail.data(), res_.tail.size())};
  if (head_only_) parts_[1] = parts_[2] = asio::const_buffer{};
  lowest().expires_after(seconds(shared_.options.body_timeout_s));
  asio::async_write(stream_, parts_,
                    [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); });
}

template <class Stream>
void HttpSession<Stream>::on_written(beast::error_code ec) {
  const bool refused = res_.close;
  res_ = HttpResponse{};  // drops what kept a binary output alive
  req_.body = {};
  req_.body_owner.reset();
  shared_.bodies.release(std::move(body_));  // kept by a request still reading it: theirs now
  if (ec) return shut();
  if (closing_ && refused) return linger();
  if (closing_) return shut();
  wait_request();
}

// After a refusal whose body was not read: stop sending, and read and drop what the client is
// still sending for a short while, so it sees the answer instead of a reset (a close with unread
// bytes sends RST, and a client still writing gets EPIPE before it reads the 413).
template <class Stream>
void HttpSession<Stream>::linger() {
  beast::error_code ignored;
  lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
  lowest().expires_after(std::chrono::seconds(2));  // once: the whole drain, however it trickles
  drain();
}

template <class Stream>
void HttpSession<Stream>::drain() {
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(64 << 10), [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
    self->lingered_ += n;
    if (ec || self->lingered_ > kLingerBytes) return self->shut();
    self->drain();
  });
}

template class HttpSession<PlainStream>;
template class HttpSession<TlsStream>;

}  // namespace dype::rt::daemon
