// The daemon's HTTP transport (Boost.Beast on Asio) against hostile and slow clients, over raw
// sockets and cpp-httplib's client: each case asserts the precise status and message (or that the
// server closed the connection), then that a good request is still answered at once. A small route
// table stands in for the daemon's (the engine is not what is tested here; test_daemon_http runs the
// same transport under the real routes).
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/daemon/http/http_transport.h"
#include "../test_raw_http.h"

#include <httplib.h>

using namespace dype::rt::daemon;
using dype::test::RawConnection;
using dype::test::RawResponse;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double rss_mb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

void json_error(HttpResponse& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(json{{"error", message}}.dump(), "application/json");
}

class HttpTransportTest : public ::testing::Test {
 protected:
  void start(TransportOptions o) {
    router_.add("GET", "/live", [](const HttpRequest&, HttpResponse& res) { res.set_content("{\"live\":true}", "application/json"); },
                RunOn::io);
    router_.add("POST", "/echo", [](const HttpRequest& req, HttpResponse& res) {
      res.set_content(json{{"bytes", req.body.size()}, {"head", std::string(req.body.substr(0, 16))}}.dump(),
                      "application/json");
    });
    router_.add("GET", "/wait", [this](const HttpRequest&, HttpResponse& res) {
      ++waiting_;
      while (!release_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      res.set_content("{}", "application/json");
    });
    router_.add("GET", R"(/items/([^/]+))", [](const HttpRequest& req, HttpResponse& res) {
      res.set_content(json{{"id", req.matches[1].str()}, {"q", req.get_param_value("q")}}.dump(), "application/json");
    });
    // Taken on the I/O thread and answered later, from the test's thread (as the infer route answers
    // from the engine's completion); /expire is answered by its deadline; /decline runs its handler
    // on a worker.
    router_.add("GET", "/later",
                [this](const HttpRequest&, const std::shared_ptr<HttpReply>& reply) {
                  std::lock_guard lock(held_mu_);
                  held_.push_back(reply);
                  return true;
                },
                [](const HttpRequest&, HttpResponse& res) { res.set_content("worker", "text/plain"); });
    router_.add("GET", "/now",
                [](const HttpRequest& req, const std::shared_ptr<HttpReply>& reply) {
                  HttpResponse res;
                  res.set_content("now " + req.get_param_value("n"), "text/plain");
                  reply->send(std::move(res));
                  return true;
                },
                [](const HttpRequest&, HttpResponse& res) { res.set_content("worker", "text/plain"); });
    router_.add("GET", "/expire",
                [this](const HttpRequest&, const std::shared_ptr<HttpReply>& reply) {
                  reply->expire_at(Clock::now() + std::chrono::milliseconds(50), [reply] {
                    HttpResponse res;
                    json_error(res, 504, "deadline passed");
                    reply->send(std::move(res));
                  });
                  std::lock_guard lock(held_mu_);
                  held_.push_back(reply);  // never answered otherwise while held
                  return true;
                },
                [](const HttpRequest&, HttpResponse& res) { res.set_content("worker", "text/plain"); });
    router_.add("GET", "/decline", [](const HttpRequest&, const std::shared_ptr<HttpReply>&) { return false; },
                [](const HttpRequest&, HttpResponse& res) { res.set_content("worker", "text/plain"); });
    transport_ = std::make_unique<HttpTransport>(o, json_error);
    port_ = transport_->listen("127.0.0.1", 0, router_);
    transport_->start();
  }
  void TearDown() override {
    release_ = true;
    take_held();  // stop() waits for every reply to be let go
    if (transport_) transport_->stop();
  }
  // The replies /later and /expire took so far, no longer held by the fixture.
  std::vector<std::shared_ptr<HttpReply>> take_held() {
    std::lock_guard lock(held_mu_);
    return std::move(held_);
  }
  std::size_t held() {
    std::lock_guard lock(held_mu_);
    return held_.size();
  }
  void wait_held(std::size_t n) {
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (held() < n && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(held(), n);
  }
  // A good request on a fresh connection: answered 200, and how long it took.
  double good_request_s() {
    const auto t0 = Clock::now();
    RawConnection c(port_);
    c.send_all("GET /live HTTP/1.1\r\nHost: x\r\n\r\n");
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "{\"live\":true}");
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  static std::string error_of(const RawResponse& r) { return json::parse(r.body).value("error", ""); }

  HttpRouter router_;
  std::unique_ptr<HttpTransport> transport_;
  int port_ = -1;
  std::atomic<int> waiting_{0};
  std::atomic<bool> release_{false};
  std::mutex held_mu_;
  std::vector<std::shared_ptr<HttpReply>> held_;
};

TEST_F(HttpTransportTest, IdleConnectionsHoldNoThreadAndLittleMemory) {
  start({.workers = 2});
  const double before = rss_mb();
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<RawConnection>(port_));
  for (int i = 0; i < 400 && transport_->counters().open.load() < 300; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(transport_->counters().open.load(), 300u);
  // 300 idle connections against 2 workers and 2 I/O threads: a thread per connection would
  // leave the good request waiting for an idle timeout.
  EXPECT_LT(good_request_s(), 2.0);
  EXPECT_LT(rss_mb() - before, 64.0) << "RSS grew from " << before << " MB";
  // A worker handler in flight does not hold up I/O-thread routes either.
  std::thread blocked([&] {
    RawConnection c(port_);
    c.send_all("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(c.read_response().status, 200);
  });
  while (waiting_.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_LT(good_request_s(), 2.0);
  release_ = true;
  blocked.join();
}

TEST_F(HttpTransportTest, SlowHeadersAreCutOffByTheHeaderTimeout) {
  start({.header_timeout_s = 0.4});
  RawConnection partial(port_);
  partial.send_all("GET /live HTTP/1.1\r\nHo");
  // 1 byte every 100 ms keeps bytes coming but never finishes the headers in time.
  std::atomic<bool> dripping{true};
  RawConnection drip(port_);
  std::thread t([&] {
    const std::string req = "GET /live HTTP/1.1\r\nHost: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n\r\n";
    for (char ch : req) {
      if (!dripping.load()) break;
      try {
        drip.send_all(std::string_view(&ch, 1));
      } catch (const std::exception&) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto t0 = Clock::now();
  EXPECT_TRUE(partial.closed_by_server());
  EXPECT_TRUE(drip.closed_by_server());
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  dripping = false;
  t.join();
  EXPECT_LT(waited, 3.0);
  EXPECT_GE(transport_->counters().timeouts.load(), 2u);
  EXPECT_LT(good_request_s(), 2.0);
}

TEST_F(HttpTransportTest, IdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  start({.idle_timeout_s = 0.3});
  RawConnection c(port_);
  c.send_all("GET /live HTTP/1.1\r\nHost: x\r\n\r\n");
  const RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("connection"), "keep-alive");
  EXPECT_TRUE(c.closed_by_server());
}

TEST_F(HttpTransportTest, OversizedOrTooManyHeadersGet431) {
  start({.max_header_bytes = 4096, .max_header_fields = 20});
  {
    RawConnection c(port_);
    c.send_all("GET /live HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n");
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 431);
    EXPECT_EQ(error_of(r), "request line and headers exceed 4096 bytes");
    EXPECT_EQ(r.headers.at("connection"), "close");
  }
  {
    RawConnection c(port_);
    std::string req = "GET /live HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 30; ++i) req += "X-F" + std::to_string(i) + ": v\r\n";
    c.send_all(req + "\r\n");
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 431);
    EXPECT_EQ(error_of(r), "31 header fields (at most 20)");
  }
  EXPECT_LT(good_request_s(), 2.0);
}

TEST_F(HttpTransportTest, ConnectionsBeyondTheCapGet503ThenServiceResumes) {
  start({.max_connections = 4});
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawConnection>(port_));
    held.back()->send_all("GET /live HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(held.back()->read_response().status, 200);
  }
  RawConnection over(port_);
  const RawResponse r = over.read_response();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(error_of(r), "too many open connections (--max-connections 4); retry later");
  EXPECT_EQ(r.headers.at("retry-after"), "1");
  EXPECT_EQ(transport_->counters().connections_refused.load(), 1u);
  held.pop_back();
  for (int i = 0; i < 200 && transport_->counters().open.load() >= 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_LT(good_request_s(), 2.0);
}

TEST_F(HttpTransportTest, PipelinedRequestsAreAnsweredInOrder) {
  start({});
  RawConnection c(port_);
  c.send_all("GET /items/a?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
             "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
             "GET /items/b%20c?q=x+y HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(json::parse(c.read_response().body), (json{{"id", "a"}, {"q", "1"}}));
  EXPECT_EQ(json::parse(c.read_response().body), (json{{"bytes", 5}, {"head", "hello"}}));
  EXPECT_EQ(json::parse(c.read_response().body), (json{{"id", "b c"}, {"q", "x y"}}));
}

TEST_F(HttpTransportTest, FramingAbuseIsRefusedPrecisely) {
  start({.max_request_bytes = 1 << 20});
  struct Case {
    std::string request;
    int status;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400,
       "Content-Length: malformed, sent more than once with different values, or sent with Transfer-Encoding"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400,
       "Content-Length: malformed, sent more than once with different values, or sent with Transfer-Encoding"},
      {"POST /echo HTTP/1.0\r\nHost: x\r\n\r\nhello", 411, "Content-Length: required (or Transfer-Encoding: chunked)"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", 413,
       "request body exceeds --max-request-bytes (1048576 bytes)"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello", 415,
       "Content-Encoding: 'gzip' is not supported; send the body uncompressed"},
      {"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400,
       "Transfer-Encoding: only 'chunked' (last) is supported"},
      {"GET /items/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request target: malformed percent-escape in '/items/%zz'"},
      {"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404, "no such route"},
      {"DELETE /live HTTP/1.1\r\nHost: x\r\n\r\n", 405, "method DELETE not allowed on /live"},
  };
  for (const Case& k : cases) {
    RawConnection c(port_);
    c.send_all(k.request);
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, k.status) << k.request;
    EXPECT_EQ(error_of(r), k.error) << k.request;
  }
  {  // not HTTP at all
    RawConnection c(port_);
    c.send_all("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 binary\r\n\r\n");
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(error_of(r).rfind("malformed HTTP request: ", 0), 0u) << r.body;
  }
  EXPECT_LT(good_request_s(), 2.0);
}

TEST_F(HttpTransportTest, OversizedBodyGets413EvenWhileTheClientKeepsSending) {
  start({.max_request_bytes = 1 << 20});
  // cpp-httplib's client sends the whole 4 MB: it must read the 413, not a reset.
  httplib::Client client("127.0.0.1", port_);
  auto r = client.Post("/echo", std::string(4u << 20, 'x'), "application/octet-stream");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(json::parse(r->body)["error"], "request body exceeds --max-request-bytes (1048576 bytes)");
  auto ok = client.Post("/echo", std::string(1000, 'y'), "application/octet-stream");
  ASSERT_TRUE(ok);
  EXPECT_EQ(json::parse(ok->body)["bytes"], 1000);
}

TEST_F(HttpTransportTest, ExpectContinueChunkedAndHead) {
  start({});
  {
    RawConnection c(port_);
    c.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    EXPECT_EQ(c.read_head().status, 100);
    c.send_all("hello");
    EXPECT_EQ(json::parse(c.read_response().body), (json{{"bytes", 5}, {"head", "hello"}}));
  }
  {
    RawConnection c(port_);
    c.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
    EXPECT_EQ(json::parse(c.read_response().body), (json{{"bytes", 7}, {"head", "abcdefg"}}));
  }
  {
    RawConnection c(port_);
    c.send_all("HEAD /live HTTP/1.1\r\nHost: x\r\n\r\nGET /live HTTP/1.1\r\nHost: x\r\n\r\n");
    const RawResponse head = c.read_head();
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.headers.at("content-length"), "13");
    EXPECT_EQ(c.read_response().body, "{\"live\":true}");  // the HEAD sent no body before it
  }
}

TEST_F(HttpTransportTest, StopClosesEveryConnectionWhateverItsState) {
  start({.header_timeout_s = 60, .body_timeout_s = 60});
  RawConnection idle(port_), half_header(port_), half_body(port_);
  half_header.send_all("GET /live HTTP/1.1\r\nHo");
  half_body.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  transport_->stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
  EXPECT_TRUE(idle.closed_by_server());
  EXPECT_TRUE(half_header.closed_by_server());
  EXPECT_TRUE(half_body.closed_by_server());
}

// A request taken by a route's inline handler is answered when its reply is sent, from any thread;
// the requests pipelined behind it wait (the connection reads nothing more), so the answers stay in
// request order even though the later request could be answered at once.
TEST_F(HttpTransportTest, RepliesSentLaterFromAnotherThreadKeepRequestOrder) {
  start({});
  RawConnection c(port_);
  c.send_all("GET /later HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /now?n=2 HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /decline HTTP/1.1\r\nHost: x\r\n\r\n");
  wait_held(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(held(), 1u);
  std::thread([replies = take_held()] {
    HttpResponse res;
    res.set_content("later", "text/plain");
    replies.front()->send(std::move(res));
    HttpResponse again;
    again.set_content("twice", "text/plain");
    replies.front()->send(std::move(again));  // only the first send counts
  }).join();
  RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "later");
  r = c.read_response();
  EXPECT_EQ(r.body, "now 2");
  r = c.read_response();
  EXPECT_EQ(r.body, "worker");
  EXPECT_LT(good_request_s(), 1.0);
}

// A deadline armed on a taken request answers it when nothing else did; a send after it is
// ignored and the connection serves the next request.
TEST_F(HttpTransportTest, TakenRequestIsAnsweredByItsDeadline) {
  start({});
  RawConnection c(port_);
  const auto t0 = Clock::now();
  c.send_all("GET /expire HTTP/1.1\r\nHost: x\r\n\r\n");
  RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(error_of(r), "deadline passed");
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  for (const auto& reply : take_held()) {
    HttpResponse late;
    late.set_content("late", "text/plain");
    reply->send(std::move(late));
  }
  c.send_all("GET /now?n=3 HTTP/1.1\r\nHost: x\r\n\r\n");
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "now 3");
}

// stop() waits until every taken reply has been let go (an engine completion still to come posts
// onto the connection's strand), then closes the connection.
TEST_F(HttpTransportTest, StopWaitsForTakenRepliesToBeLetGo) {
  start({});
  RawConnection c(port_);
  c.send_all("GET /later HTTP/1.1\r\nHost: x\r\n\r\n");
  wait_held(1);
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    transport_->stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(stopped.load());
  {
    auto replies = take_held();
    HttpResponse res;
    res.set_content("late", "text/plain");
    replies.front()->send(std::move(res));  // the connection is closed: dropped
  }
  stopper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(c.read_response().status, 0);
}

}  // namespace
