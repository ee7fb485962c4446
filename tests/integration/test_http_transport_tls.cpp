// The daemon's HTTP transport serving HTTPS (a listener given a TlsIdentity), against good and bad
// clients: cpp-httplib's SSLClient trusting the test CA gets the right answers on one keep-alive
// connection (a body read straight from the TLS stream included); plain HTTP sent to the HTTPS
// port, and a client trusting another CA, fail and are counted while the server goes on serving; a
// connection that never (or only half) handshakes is closed by the header timeout; handshakes count
// in the connection cap; stop() closes TLS connections whatever their state. Certificates are made
// at test time with the openssl command line (skipped without it).
#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <utility>  // before Asio (Boost 1.74)
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/daemon/http/http_transport.h"
#include "runtime/daemon/http/tls.h"
#include "../test_raw_http.h"
#include "../test_tls_certs.h"

#include <httplib.h>

using namespace dype::rt::daemon;
using dype::test::RawConnection;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;

namespace {

// cpp-httplib's TLS client writes through OpenSSL's socket BIO, which raises SIGPIPE when the server
// has closed the connection (a refused client): an error to see, not a signal that ends the test.
[[maybe_unused]] const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

void json_error(HttpResponse& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(json{{"error", message}}.dump(), "application/json");
}

// A blocking TLS client on Asio: connect, handshake trusting `ca`, one request, one response.
class TlsConnection {
 public:
  TlsConnection(int port, const std::string& ca) : ctx_(asio::ssl::context::tls_client), stream_(ioc_, ctx_) {
    ctx_.load_verify_file(ca);
    stream_.set_verify_mode(asio::ssl::verify_peer);
    stream_.lowest_layer().connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    stream_.handshake(asio::ssl::stream_base::client);
  }
  int get_live() {
    const std::string req = "GET /live HTTP/1.1\r\nHost: x\r\n\r\n";
    asio::write(stream_, asio::buffer(req));
    std::string in;
    char buf[4096];
    boost::system::error_code ec;
    while (in.find("{\"live\":true}") == std::string::npos) {
      const std::size_t n = stream_.read_some(asio::buffer(buf), ec);
      if (ec) return 0;
      in.append(buf, n);
    }
    return std::stoi(in.substr(9, 3));
  }
  // True when the server closes the connection (end of stream, a truncated stream or a reset) within 5 s.
  bool closed_by_server() {
    timeval tv{5, 0};
    setsockopt(stream_.lowest_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    boost::system::error_code ec;
    stream_.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated || ec == asio::error::connection_reset ||
           (ec && ec != asio::error::would_block && ec != asio::error::try_again);
  }

 private:
  asio::io_context ioc_;
  asio::ssl::context ctx_;
  asio::ssl::stream<asio::ip::tcp::socket> stream_;
};

class HttpTransportTls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pki_.ok) GTEST_SKIP() << pki_.why;
  }
  void start(TransportOptions o) {
    router_.add("GET", "/live", [](const HttpRequest&, HttpResponse& res) { res.set_content("{\"live\":true}", "application/json"); },
                RunOn::io);
    router_.add("POST", "/echo", [](const HttpRequest& req, HttpResponse& res) {
      std::uint64_t sum = 0;
      for (unsigned char ch : req.body) sum += ch;
      res.set_content(json{{"bytes", req.body.size()}, {"sum", sum}}.dump(), "application/json");
    });
    identity_ = load_tls_identity(pki_.server_cert.string(), pki_.server_key.string());
    transport_ = std::make_unique<HttpTransport>(o, json_error);
    port_ = transport_->listen("127.0.0.1", 0, router_, &*identity_);
    transport_->start();
  }
  void TearDown() override {
    if (transport_) transport_->stop();
  }
  std::unique_ptr<httplib::SSLClient> client(const std::filesystem::path& ca) const {
    auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", port_);
    c->set_ca_cert_path(ca.string());
    c->enable_server_certificate_verification(true);
    c->set_read_timeout(10, 0);
    return c;
  }
  // A good HTTPS request on a fresh connection is answered.
  void expect_served() {
    auto c = client(pki_.ca);
    auto r = c->Get("/live");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"live\":true}");
  }
  void wait_for(const std::atomic<std::uint64_t>& counter, std::uint64_t at_least) {
    for (int i = 0; i < 400 && counter.load() < at_least; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  const dype::test::TestPki& pki_ = dype::test::make_test_pki();
  std::optional<TlsIdentity> identity_;
  HttpRouter router_;
  std::unique_ptr<HttpTransport> transport_;
  int port_ = -1;
};

TEST_F(HttpTransportTls, ServesHttpsOnOneKeepAliveConnection) {
  start({});
  auto c = client(pki_.ca);
  c->set_keep_alive(true);
  for (int i = 0; i < 5; ++i) {
    auto r = c->Get("/live");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"live\":true}");
  }
  // A body larger than one TLS record, most of it read straight from the stream into the buffer.
  std::string body(300 << 10, '\0');
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>(i * 7 + 3);
    sum += static_cast<unsigned char>(body[i]);
  }
  auto r = c->Post("/echo", body, "application/octet-stream");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), (json{{"bytes", body.size()}, {"sum", sum}}));
  EXPECT_EQ(transport_->counters().connections_accepted.load(), 1u);
  EXPECT_EQ(transport_->counters().tls_handshake_failures.load(), 0u);
}

TEST_F(HttpTransportTls, PlainHttpToTheTlsPortIsClosedAndCountedAndServiceGoesOn) {
  start({});
  RawConnection plain(port_, 5);
  plain.send_all("GET /live HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(plain.closed_by_server());  // no answer (OpenSSL sends no alert to an HTTP request)
  wait_for(transport_->counters().tls_handshake_failures, 1);
  EXPECT_EQ(transport_->counters().tls_handshake_failures.load(), 1u);
  expect_served();
  // plain HTTP clients get an error, not a hang
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(5, 0);
  auto r = c.Get("/live");
  EXPECT_FALSE(r && r->status == 200);
  expect_served();
}

TEST_F(HttpTransportTls, ClientTrustingAnotherCaIsRefused) {
  start({});
  auto c = client(pki_.other_ca);
  auto r = c->Get("/live");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification) << httplib::to_string(r.error());
  // cpp-httplib checks the certificate after the handshake; a client that checks it during the
  // handshake aborts it, and the server counts a failed handshake.
  EXPECT_THROW(TlsConnection(port_, pki_.other_ca.string()), boost::system::system_error);
  wait_for(transport_->counters().tls_handshake_failures, 1);
  EXPECT_EQ(transport_->counters().tls_handshake_failures.load(), 1u);
  expect_served();
}

TEST_F(HttpTransportTls, ConnectionThatNeverHandshakesIsClosedByTheHeaderTimeout) {
  start({.idle_timeout_s = 60, .header_timeout_s = 0.4});
  RawConnection silent(port_, 10), half(port_, 10);
  half.send_all(std::string("\x16\x03\x01\x02\x00\x01", 6));  // a ClientHello record's first bytes, no more
  const auto t0 = Clock::now();
  EXPECT_TRUE(silent.closed_by_server());
  EXPECT_TRUE(half.closed_by_server());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
  wait_for(transport_->counters().timeouts, 2);  // counted once the closed read completes
  EXPECT_GE(transport_->counters().timeouts.load(), 2u);
  EXPECT_EQ(transport_->counters().tls_handshake_failures.load(), 0u);  // timeouts, not failures
  expect_served();
}

TEST_F(HttpTransportTls, HandshakesCountInTheConnectionCap) {
  start({.max_connections = 2, .header_timeout_s = 30});
  auto a = std::make_unique<RawConnection>(port_);
  RawConnection b(port_);  // both open, neither handshaking
  for (int i = 0; i < 400 && transport_->counters().open.load() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto c = client(pki_.ca);
  EXPECT_FALSE(c->Get("/live"));
  EXPECT_EQ(transport_->counters().connections_refused.load(), 1u);
  a.reset();
  for (int i = 0; i < 400 && transport_->counters().open.load() >= 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  expect_served();
}

TEST_F(HttpTransportTls, StopClosesEveryTlsConnectionWhateverItsState) {
  start({.idle_timeout_s = 60, .header_timeout_s = 60});
  TlsConnection established(port_, pki_.ca.string());
  EXPECT_EQ(established.get_live(), 200);  // now idle between keep-alive requests
  RawConnection silent(port_), half(port_);
  half.send_all(std::string("\x16\x03\x01\x02\x00\x01", 6));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  transport_->stop();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
  EXPECT_TRUE(established.closed_by_server());
  EXPECT_TRUE(silent.closed_by_server());
  EXPECT_TRUE(half.closed_by_server());
}

TEST(TlsFiles, BadFilesAreRefusedNamingTheFlag) {
  const dype::test::TestPki& pki = dype::test::make_test_pki();
  if (!pki.ok) GTEST_SKIP() << pki.why;
  auto refused = [](const std::string& cert, const std::string& key, const std::string& flag, const std::string& says) {
    try {
      load_tls_identity(cert, key);
      ADD_FAILURE() << "accepted " << cert << " / " << key;
    } catch (const dype::InputError& e) {
      EXPECT_EQ(e.where(), flag) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  const std::string cert = pki.server_cert.string(), key = pki.server_key.string();
  EXPECT_FALSE(load_tls_identity("", ""));
  EXPECT_TRUE(load_tls_identity(cert, key));
  refused(cert, "", "--tls-key", "required with --tls-cert");
  refused("", key, "--tls-cert", "required with --tls-key");
  refused("/no/such.pem", key, "--tls-cert", "cannot read '/no/such.pem'");
  refused(cert, "/no/such.key", "--tls-key", "cannot read '/no/such.key'");
  refused(key, key, "--tls-cert", "holds no PEM certificate");
  refused(cert, cert, "--tls-key", "holds no unencrypted PEM private key");
  refused(cert, pki.other_key.string(), "--tls-key", "is not the private key of the certificate");
  EXPECT_THROW(load_ca_certificates(key, "--tls-ca"), dype::InputError);
  EXPECT_NE(load_ca_certificates(pki.ca.string(), "--tls-ca").find("BEGIN CERTIFICATE"), std::string::npos);
}

}  // namespace
