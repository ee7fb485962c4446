#pragma once
// Answering an HTTP request: a JSON body, an {"error": "..."} body, and a handler's exception
// turned into its status through the daemon's one error table (errors.h). Used by every route.
//
//   const std::string reason = guarded(res, [&] { send_json(res, 200, {{"live", true}}); });
//   metrics.record(model, reason, seconds);   // "ok", or the error's reason ("not_found", ...)
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/daemon/errors.h"
#include "runtime/daemon/http/http_message.h"

namespace dype::rt::daemon {

inline void send_json(HttpResponse& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.tail = {};
  res.keep.reset();
  // Invalid UTF-8 (a model or tensor name echoed in an error) is replaced, not thrown as
  // type_error 316, which turned a 400/404 into a 500.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

inline void send_error(HttpResponse& res, int status, const std::string& message) {
  send_json(res, status, {{"error", message}});
}

// Runs a handler body and turns its exceptions into {"error"} answers; returns the metrics reason.
template <typename F>
std::string guarded(HttpResponse& res, F&& f) {
  try {
    f();
    return "ok";
  } catch (...) {
    const ErrorAnswer answer = answer_for(std::current_exception());
    send_error(res, answer.http_status, answer.message);
    return answer.reason;
  }
}

}  // namespace dype::rt::daemon
