#include "runtime/daemon/http/http_router.h"

namespace dype::rt::daemon {

void HttpRouter::add(std::string method, const std::string& pattern, Handler handler, RunOn run_on) {
  routes_.push_back({std::move(method), std::regex(pattern, std::regex::ECMAScript | std::regex::optimize),
                     std::move(handler), run_on, {}});
}

void HttpRouter::add(std::string method, const std::string& pattern, InlineHandler try_inline, Handler handler) {
  add(std::move(method), pattern, std::move(handler), RunOn::worker);
  routes_.back().try_inline = std::move(try_inline);
}

const HttpRouter::Route* HttpRouter::match(HttpRequest& req, bool& path_known) const {
  // The method first: std::regex costs microseconds a pattern, so only the method's routes are
  // tried; the others only when none matched, to tell 405 from 404.
  auto method_fits = [&](const Route& r) { return r.method == req.method || (req.method == "HEAD" && r.method == "GET"); };
  std::smatch m;
  for (const Route& r : routes_) {
    if (!method_fits(r) || !std::regex_match(req.path, m, r.pattern)) continue;
    req.matches.clear();
    for (const auto& sub : m) req.matches.push_back({sub.str(), sub.matched});
    path_known = true;
    return &r;
  }
  path_known = false;
  for (const Route& r : routes_)
    if (!method_fits(r) && std::regex_match(req.path, r.pattern)) path_known = true;
  return nullptr;
}

std::string HttpRouter::allowed_methods(const std::string& path) const {
  std::string allow;
  for (const Route& r : routes_) {
    if (!std::regex_match(path, r.pattern) || allow.find(r.method) != std::string::npos) continue;
    allow += (allow.empty() ? "" : ", ") + r.method;
  }
  return allow;
}

}  // namespace dype::rt::daemon
