#include "runtime/daemon/http/http_message.h"

#include <cctype>

namespace dype::rt::daemon {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::size_t HttpRequest::header_count(std::string_view name) const {
  std::size_t n = 0;
  for (const auto& [k, v] : headers) n += iequals(k, name) ? 1 : 0;
  return n;
}

std::string HttpRequest::get_header_value(std::string_view name, std::size_t i) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name) && i-- == 0) return v;
  return {};
}

bool HttpRequest::has_param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return true;
  return false;
}

std::string HttpRequest::get_param_value(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return {};
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool percent_decode(std::string_view s, std::string& out, bool plus_is_space) {
  out.clear();
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) return false;
      const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(plus_is_space && s[i] == '+' ? ' ' : s[i]);
    }
  }
  return true;
}

bool split_target(std::string_view target, std::string& path, HeaderFields& params) {
  params.clear();
  const std::size_t q = target.find('?');
  if (!percent_decode(target.substr(0, q), path, false)) return false;
  if (q == std::string_view::npos) return true;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    std::string k, v;
    if (!percent_decode(pair.substr(0, eq), k, true)) return false;
    if (eq != std::string_view::npos && !percent_decode(pair.substr(eq + 1), v, true)) return false;
    params.emplace_back(std::move(k), std::move(v));
  }
  return true;
}

}  // namespace dype::rt::daemon
