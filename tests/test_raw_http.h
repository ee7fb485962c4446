// A raw HTTP/1.1 client over a blocking loopback socket, for tests that must send what a
// well-behaved client library never would (partial requests, header abuse, pipelining) and read
// exactly what the server answers.
//
//   dype::test::RawConnection c(port);
//   c.send_all("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n");
//   const dype::test::RawResponse r = c.read_response();   // status 0: closed before an answer
#pragma once

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dype::test {

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class RawConnection {
 public:
  explicit RawConnection(int port, int timeout_s = 10) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
    timeval tv{timeout_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConnection() { close(fd_); }
  void send_all(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send failed");
      s.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void end_writes() { shutdown(fd_, SHUT_WR); }
  // True when the server closed the connection (end of stream, or a reset when it closed with
  // bytes unread) within the receive timeout, sending nothing first.
  bool closed_by_server() {
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  // A response's status line and headers only (a 100 Continue, or the answer to HEAD), consumed;
  // status 0 when the connection closed first.
  RawResponse read_head() {
    RawResponse r;
    std::size_t end;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return r;
    std::istringstream head(in_.substr(0, end));
    std::string line, version;
    std::getline(head, line);
    std::istringstream(line) >> version >> r.status;
    while (std::getline(head, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string k = line.substr(0, colon), v = line.substr(colon + 1);
      for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
      while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) v.pop_back();
      r.headers[k] = v;
    }
    in_.erase(0, end + 4);
    return r;
  }
  // One response (Content-Length framed); status 0 when the connection closed first.
  RawResponse read_response() {
    RawResponse r = read_head();
    if (r.status == 0) return r;
    const std::size_t length = std::stoul(r.headers.at("content-length"));
    while (in_.size() < length)
      if (!fill()) return RawResponse{};
    r.body = in_.substr(0, length);
    in_.erase(0, length);
    return r;
  }

 private:
  bool fill() {
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string in_;
};

}  // namespace dype::test
