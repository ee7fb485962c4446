#pragma once
// An HTTP request as the routes see it, and the response they fill: independent of the transport
// (http_session.cpp parses and writes them with Boost.Beast on Asio). Header names compare
// case-insensitively; the path is percent-decoded before routing and the query split into
// decoded parameters.
//
//   void get_thing(const HttpRequest& req, HttpResponse& res) {
//     const std::string id = req.matches[1];               // the route's first capture
//     if (req.has_param("model")) ... req.get_param_value("model") ...
//     res.set_content(R"({"ok": true})", "application/json");
//   }
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dype::rt::daemon {

// One capture of a route's pattern.
struct PathMatch {
  std::string value;
  bool matched = false;
  const std::string& str() const { return value; }
  operator const std::string&() const { return value; }  // NOLINT: reads as the captured text
  bool operator==(std::string_view s) const { return value == s; }
};

bool iequals(std::string_view a, std::string_view b);

using HeaderFields = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // as sent, query included
  std::string path;    // the target's path, percent-decoded
  std::string peer;    // the client's IP address ("" when unknown)
  HeaderFields headers;
  HeaderFields params;    // the query's parameters, decoded, in order
  std::string_view body;  // the whole body, in the connection's receive buffer
  std::size_t body_readable_past_end = 0;  // bytes after `body` that may be read (the buffer's room)
  // Holds the buffer `body` lies in: a copy keeps its bytes valid after the response is written
  // (the connection then receives its next body into another buffer).
  std::shared_ptr<const void> body_owner;
  std::vector<PathMatch> matches;  // [0] the whole path, then the route's captures
  std::chrono::steady_clock::time_point arrival;   // when the request line and headers had been parsed
  std::chrono::steady_clock::time_point received;  // when the whole body had been read

  bool has_header(std::string_view name) const { return header_count(name) > 0; }
  std::size_t header_count(std::string_view name) const;
  // The i-th value of header `name`, "" when absent.
  std::string get_header_value(std::string_view name, std::size_t i = 0) const;
  bool has_param(std::string_view name) const;
  std::string get_param_value(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  HeaderFields headers;
  // Sent after `body` without a copy (a binary output where the engine's answer holds it); `keep`
  // keeps those bytes alive until they are written.
  std::string_view tail;
  std::shared_ptr<const void> keep;
  bool close = false;  // close the connection once this is written

  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

// Percent-decodes `s` ('+' as a space when `plus_is_space`); false on a malformed escape.
bool percent_decode(std::string_view s, std::string& out, bool plus_is_space);

// Splits a target into its decoded path and query parameters; false when an escape is malformed.
bool split_target(std::string_view target, std::string& path, HeaderFields& params);

}  // namespace dype::rt::daemon
