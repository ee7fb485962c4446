#pragma once
// The route table of an HTTP port: method + a regular expression over the decoded path, tried in
// the order added. Each route says where it runs: on the connection's I/O thread (cheap answers
// that never block: health, metadata, metrics) or on the worker pool (anything that waits on the
// engine, the admin lock or a large body), so slow work never holds an I/O thread.
//
//   HttpRouter r;
//   r.add("GET", "/v2/health/live", [](const HttpRequest&, HttpResponse& res) { ... }, RunOn::io);
//   r.add("POST", R"(/v2/models/([^/]+)/infer)", infer_handler);      // RunOn::worker
//   const HttpRouter::Route* route = r.match(req);   // fills req.matches; nullptr: 404 or 405
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "runtime/daemon/http_message.h"

namespace dype::rt::daemon {

enum class RunOn { io, worker };

class HttpRouter {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
    RunOn run_on;
  };

  void add(std::string method, const std::string& pattern, Handler handler, RunOn run_on = RunOn::worker);

  // The first route whose method and pattern match (captures into req.matches), else nullptr with
  // `path_known` saying whether some other method's route matched the path (405 rather than 404).
  const Route* match(HttpRequest& req, bool& path_known) const;

  // The methods whose routes match `path`, for a 405's Allow header.
  std::string allowed_methods(const std::string& path) const;

 private:
  std::vector<Route> routes_;
};

}  // namespace dype::rt::daemon
