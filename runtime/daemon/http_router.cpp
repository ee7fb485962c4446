#include "runtime/daemon/http_router.h"

namespace dype::rt::daemon {

void HttpRouter::add(std::string method, const std::string& pattern, Handler handler, RunOn run_on) {
  routes_.push_back({std::move(method), std::regex(pattern, std::regex::ECMAScript | std::regex::optimize),
                     std::move(handler), run_on});
}

const HttpRouter::Route* HttpRouter::match(HttpRequest& req, bool& path_known) const {
  path_known = false;
  std::smatch m;
  for (const Route& r : routes_) {
    if (!std::regex_match(req.path, m, r.pattern)) continue;
    if (r.method != req.method && !(req.method == "HEAD" && r.method == "GET")) {
      path_known = true;
      continue;
    }
    req.matches.clear();
    for (const auto& sub : m) req.matches.push_back({sub.str(), sub.matched});
    return &r;
  }
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
