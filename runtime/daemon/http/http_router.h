#pragma once
// The route table of an HTTP port: method + a regular expression over the decoded path, tried in
// the order added. Each route says where it runs: on the connection's I/O thread (cheap answers
// that never block: health, metadata, metrics) or on the worker pool (anything that waits on the
// engine, the admin lock or a large body), so slow work never holds an I/O thread. A route may
// also try the request on the I/O thread first without blocking (the infer route: a small binary
// request is parsed and handed to the engine there, and answered from the engine's completion);
// when it declines, its handler runs on the worker pool.
//
//   HttpRouter r;
//   r.add("GET", "/v2/health/live", [](const HttpRequest&, HttpResponse& res) { ... }, RunOn::io);
//   r.add("POST", R"(/v2/models/([^/]+)/infer)", infer_handler);      // RunOn::worker
//   r.add("POST", R"(/v2/models/([^/]+)/infer)", try_infer_inline, infer_handler);
//   const HttpRouter::Route* route = r.match(req);   // fills req.matches; nullptr: 404 or 405
#include <chrono>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "runtime/daemon/http/http_message.h"

namespace dype::rt::daemon {

enum class RunOn { io, worker };

// The answer to a request that a route's inline handler took: given later, from any thread. The
// connection reads nothing more until it is sent (responses stay in request order), and the
// transport's stop() waits until every reply has been let go (whoever holds one must drop it).
class HttpReply {
 public:
  virtual ~HttpReply() = default;
  // Answers the request (any thread; only the first call counts).
  virtual void send(HttpResponse res) = 0;
  // Runs `work` on the connection's I/O strand (short work: encoding an answer).
  virtual void post_io(std::function<void()> work) = 0;
  // Runs `work` on the worker pool (work that may block: waiting on the engine).
  virtual void post_worker(std::function<void()> work) = 0;
  // Runs `work` on the connection's I/O strand at `deadline`, unless the request was answered by then.
  virtual void expire_at(std::chrono::steady_clock::time_point deadline, std::function<void()> work) = 0;
};

// Called on the I/O thread; must not block. True: it took the request (it answers through the
// reply, now or later); false: it did not answer, and the route's handler runs on the worker pool.
using InlineHandler = std::function<bool(const HttpRequest&, const std::shared_ptr<HttpReply>&)>;

class HttpRouter {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
    RunOn run_on;
    InlineHandler try_inline;  // empty for most routes
  };

  void add(std::string method, const std::string& pattern, Handler handler, RunOn run_on = RunOn::worker);
  // A route tried on the I/O thread first (`try_inline`), else `handler` on the worker pool.
  void add(std::string method, const std::string& pattern, InlineHandler try_inline, Handler handler);

  // The first route whose method and pattern match (captures into req.matches), else nullptr with
  // `path_known` saying whether some other method's route matched the path (405 rather than 404).
  const Route* match(HttpRequest& req, bool& path_known) const;

  // The methods whose routes match `path`, for a 405's Allow header.
  std::string allowed_methods(const std::string& path) const;

 private:
  std::vector<Route> routes_;
};

}  // namespace dype::rt::daemon
