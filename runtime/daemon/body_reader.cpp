#include "runtime/daemon/body_reader.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <httplib.h>

namespace dype::rt::daemon {
namespace {

// As httplib's default read timeout (CPPHTTPLIB_READ_TIMEOUT_SECOND), for the bytes read directly.
constexpr int kReadTimeoutMs = 5000;

// --- Finding the connection's socket -----------------------------------------------------------
// httplib hands handlers no socket, so the connection's descriptor is found by its addresses,
// which httplib does give (cached per worker thread and checked on every request: a keep-alive
// connection stays on one thread).

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool operator==(const Endpoint& o) const { return len == o.len && std::memcmp(&addr, &o.addr, len) == 0; }
};

bool endpoint_of(int fd, bool peer, Endpoint& e) {
  e.len = sizeof e.addr;
  auto* sa = reinterpret_cast<sockaddr*>(&e.addr);
  return (peer ? getpeername(fd, sa, &e.len) : getsockname(fd, sa, &e.len)) == 0;
}

// Whether `e` is ip:port as httplib prints them (getnameinfo, numeric host).
bool endpoint_is(const Endpoint& e, const std::string& ip, int port) {
  int p = -1;
  if (e.addr.ss_family == AF_INET) p = ntohs(reinterpret_cast<const sockaddr_in&>(e.addr).sin_port);
  else if (e.addr.ss_family == AF_INET6) p = ntohs(reinterpret_cast<const sockaddr_in6&>(e.addr).sin6_port);
  if (p != port) return false;
  char host[NI_MAXHOST];
  return getnameinfo(reinterpret_cast<const sockaddr*>(&e.addr), e.len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0 &&
         ip == host;
}

struct ConnectionCache {
  int fd = -1;
  Endpoint peer, local;
  std::string remote_addr, local_addr;
  int remote_port = -1, local_port = -1;
};
thread_local ConnectionCache tl_connection;

// The socket of the connection `req` came on, or -1 when it cannot be told.
int connection_fd(const httplib::Request& req) {
  ConnectionCache& c = tl_connection;
  if (c.fd >= 0 && c.remote_port == req.remote_port && c.local_port == req.local_port &&
      c.remote_addr == req.remote_addr && c.local_addr == req.local_addr) {
    Endpoint peer, local;
    if (endpoint_of(c.fd, true, peer) && peer == c.peer && endpoint_of(c.fd, false, local) && local == c.local)
      return c.fd;
  }
  c = ConnectionCache{};
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    int fd = -1;
    const std::string name = it->path().filename().string();
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    Endpoint peer, local;
    if (endpoint_of(fd, true, peer) && endpoint_is(peer, req.remote_addr, req.remote_port) &&
        endpoint_of(fd, false, local) && endpoint_is(local, req.local_addr, req.local_port)) {
      c = {fd, peer, local, req.remote_addr, req.local_addr, req.remote_port, req.local_port};
      break;
    }
  }
  return c.fd;
}

// Reads exactly n bytes, waiting up to timeout_ms for each arrival; false on timeout, close or error.
bool recv_exact(int fd, char* dst, std::size_t n, int timeout_ms) {
  while (n > 0) {
    const ssize_t r = recv(fd, dst, n, MSG_DONTWAIT);
    if (r > 0) {
      dst += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, timeout_ms);
    if (ready == 0 || (ready < 0 && errno != EINTR)) return false;
  }
  return true;
}

// The Inference-Header-Content-Length header when it is a number (checked properly when parsing).
std::optional<std::size_t> json_header_length(const httplib::Request& req) {
  if (!req.has_header("Inference-Header-Content-Length")) return std::nullopt;
  const std::string v = req.get_header_value("Inference-Header-Content-Length");
  std::size_t n = 0;
  if (std::from_chars(v.data(), v.data() + v.size(), n).ec == std::errc()) return n;
  return std::nullopt;
}

// Sizes `buffer` for the body and pads its start so the binary section lands on a 64-byte
// boundary; returns the padding.
std::size_t make_room(BodyBuffer& buffer, std::size_t length, std::optional<std::size_t> header_length) {
  buffer.reset(length + 64);
  const auto start = reinterpret_cast<std::uintptr_t>(buffer.data()) + header_length.value_or(0);
  const std::size_t pad = (64 - start % 64) % 64;
  buffer.extend_to(pad);
  return pad;
}

}  // namespace

ReceivedBody read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                       std::size_t max_request_bytes, BodyBuffer& buffer) {
  buffer.reset(0);
  std::size_t pad = 0;
  const std::size_t length = static_cast<std::size_t>(req.get_header_value<std::uint64_t>("Content-Length"));
  const bool within_limit = length > 0 && length <= max_request_bytes;
  if (within_limit) pad = make_room(buffer, length, json_header_length(req));
  auto received = [&](bool complete) {
    return ReceivedBody{complete, std::string_view(buffer.data(), buffer.size()).substr(pad)};
  };
  // Direct reads need the body's bytes as sent: not chunked, not compressed (httplib would decode
  // those), and within the limit (httplib answers 413 itself otherwise).
  const bool direct = within_limit && !req.has_header("Content-Encoding") && !req.has_header("Transfer-Encoding") &&
                      req.has_header("Content-Length");
  const int fd = direct ? connection_fd(req) : -1;
  if (fd < 0) {
    return received(reader([&](const char* data, std::size_t n) {
      buffer.append(data, n);
      return true;
    }));
  }
  // httplib may already hold the body's first bytes (read along with the headers): take that one
  // chunk through it and stop it there (it then marks the response 400; reset below). After it,
  // either the whole body is here or httplib's buffer is empty and the rest is still on the socket.
  const int status = res.status;
  reader([&](const char* data, std::size_t n) {
    buffer.append(data, n);
    return false;
  });
  res.status = status;
  const std::size_t have = buffer.size() - pad;
  if (have == 0 || have > length) return received(false);
  buffer.extend_to(pad + length);
  return received(recv_exact(fd, buffer.data() + pad + have, length - have, kReadTimeoutMs));
}

}  // namespace dype::rt::daemon
