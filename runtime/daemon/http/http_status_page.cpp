// The status page's routes (HttpRoutes::add_status_to): the page and its files, built into the
// binary (runtime/daemon/status/status_assets.h), and the JSON it polls. The files carry no data
// and are served to anyone; GET /v2/dype/status needs the --ui-token-file token when one is set
// (Authorization: Bearer, compared in constant time; the page sends the token it was given in its
// address's #token= fragment, which browsers never send to the server).
#include "runtime/daemon/http/http_answer.h"
#include "runtime/daemon/http/http_routes.h"
#include "runtime/daemon/status/status_assets.h"

namespace dype::rt::daemon {

void HttpRoutes::add_status_to(HttpRouter& r) {
  r.add("GET", "/", [](const Req&, Res& res) {
    res.status = 302;
    res.set_header("Location", "/ui/");
    res.set_content("the status page is at /ui/\n", "text/plain; charset=utf-8");
  }, RunOn::io);
  r.add("GET", "/ui", [](const Req&, Res& res) {
    res.status = 301;  // relative asset paths resolve under /ui/
    res.set_header("Location", "/ui/");
    res.set_content("the status page is at /ui/\n", "text/plain; charset=utf-8");
  }, RunOn::io);
  r.add("GET", "/ui/(.*)", [this](const Req& req, Res& res) { get_status_file(req, res); }, RunOn::io);
  r.add("GET", "/v2/dype/status", [this](const Req& req, Res& res) { get_status(req, res); });
}

void HttpRoutes::get_status_file(const Req& req, Res& res) const {
  const std::string name = req.matches[1].str().empty() ? "index.html" : req.matches[1].str();
  const StatusAsset* a = find_status_asset(name);
  if (!a) return send_error(res, 404, "no status page file '" + name + "'");
  res.set_content(std::string(a->body), std::string(a->content_type));
  // Built into this binary: a restarted daemon may serve another page, so browsers revalidate.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
}

void HttpRoutes::get_status(const Req& req, Res& res) {
  guarded(res, [&] {
    if (!options_.ui_token.empty() && !bearer_matches(req.get_header_value("Authorization"), options_.ui_token))
      throw Unauthorized("missing or wrong status page token (Authorization: Bearer <token>; open the page as "
                         "/ui/#token=<token>)");
    send_json(res, 200, admin_.status());
  });
}

}  // namespace dype::rt::daemon
