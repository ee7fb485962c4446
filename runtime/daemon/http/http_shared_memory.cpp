// The shared-memory extensions over HTTP, as KServe/Triton specify them:
//   GET  /v2/systemsharedmemory[/region/{name}]/status     [{"name", "key", "offset", "byte_size"}]
//   POST /v2/systemsharedmemory/region/{name}/register      {"key", "offset", "byte_size"}
//   POST /v2/systemsharedmemory[/region/{name}]/unregister
// and /v2/cudasharedmemory/... with {"raw_handle": {"b64"}, "device_id", "byte_size"}. The infer
// token applies; a region belongs to the caller that registered it (shared_memory_registry.h).
#include <boost/beast/core/detail/base64.hpp>

#include "runtime/daemon/http/http_answer.h"
#include "runtime/daemon/http/http_routes.h"
#include "runtime/daemon/shm/shared_memory_registry.h"

namespace dype::rt::daemon {
namespace {

using nlohmann::json;
using Kind = SharedMemoryRegion::Kind;

std::uint64_t size_field(const json& j, const char* key, bool required) {
  if (!j.contains(key)) {
    if (required) throw InputError(key, "missing");
    return 0;
  }
  // nlohmann parses every integer >= 0 as unsigned: anything else is a negative or not an integer.
  if (!j[key].is_number_unsigned()) throw InputError(key, "must be an integer >= 0");
  return j[key].get<std::uint64_t>();
}

std::optional<std::string> region_param(const HttpRequest& req) {
  return req.matches.size() > 1 && req.matches[1].matched
             ? std::optional<std::string>(req.matches[1].str())
             : std::nullopt;
}

// Standard base64 with its padding, as Triton's clients send the 64-byte handle ("...==").
// Beast's decoder stops at the first '=', so the padding is checked here.
std::string decode_base64(const std::string& text) {
  namespace b64 = boost::beast::detail::base64;
  const std::size_t pad = text.size() - text.find_last_not_of('=') - 1;
  const std::size_t body = text.size() - pad;  // all '=': pad is the whole text
  for (std::size_t i = 0; i < body; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (!std::isalnum(c) && c != '+' && c != '/')
      throw InputError("raw_handle.b64", "is not base64 (character " + std::to_string(i) + ")");
  }
  if (pad > 2 || (pad > 0 && text.size() % 4 != 0) || body % 4 == 1)
    throw InputError("raw_handle.b64", "is not base64 (its length or padding is wrong)");
  std::string out(b64::decoded_size(body) + 3, '\0');
  const auto [written, read] = b64::decode(out.data(), text.data(), body);
  if (read != body) throw InputError("raw_handle.b64", "is not base64");
  out.resize(written);
  return out;
}

}  // namespace

void HttpRoutes::add_shared_memory_to(HttpRouter& r) {
  for (const bool cuda : {false, true}) {
    const std::string base = cuda ? "/v2/cudasharedmemory" : "/v2/systemsharedmemory";
    const std::string region = "(?:/region/([^/]+))?";
    r.add("GET", base + region + "/status",
          [this, cuda](const Req& req, Res& res) { get_shm_status(req, res, cuda); });
    r.add("POST", base + "/region/([^/]+)/register",
          [this, cuda](const Req& req, Res& res) { post_shm_register(req, res, cuda); });
    r.add("POST", base + region + "/unregister",
          [this, cuda](const Req& req, Res& res) { post_shm_unregister(req, res, cuda); });
  }
}

std::string HttpRoutes::shm_owner(const Req& req) const {
  check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
  if (!shm_)
    throw Forbidden(
        "shared memory is off: dype-serve accepts client shared-memory regions only with "
        "--allow-client-shm");
  shm_->check_allowed();
  return graph_owner(req).id();
}

void HttpRoutes::get_shm_status(const Req& req, Res& res, bool cuda) {
  guarded(res, [&] {
    const std::string owner = shm_owner(req);
    json out = json::array();
    for (const SharedMemoryRegion& g :
         shm_->status(cuda ? Kind::cuda : Kind::system, region_param(req), owner)) {
      if (cuda)
        out.push_back({{"name", g.name}, {"device_id", g.device_id}, {"byte_size", g.byte_size}});
      else
        out.push_back(
            {{"name", g.name}, {"key", g.key}, {"offset", g.offset}, {"byte_size", g.byte_size}});
    }
    send_json(res, 200, out);
  });
}

void HttpRoutes::post_shm_register(const Req& req, Res& res, bool cuda) {
  guarded(res, [&] {
    const std::string owner = shm_owner(req);
    const json body = body_json(req);
    const std::string name = req.matches[1];
    if (cuda) {
      if (!body.contains("raw_handle") || !body["raw_handle"].is_object() ||
          !body["raw_handle"].contains("b64") || !body["raw_handle"]["b64"].is_string())
        throw InputError("raw_handle",
                         "must be {\"b64\": <the serialised cudaIpcMemHandle_t, base64>}");
      if (!body.contains("device_id") || !body["device_id"].is_number_integer())
        throw InputError("device_id", "missing or not an integer");
      shm_->register_cuda(name, decode_base64(body["raw_handle"]["b64"].get<std::string>()),
                          body["device_id"].get<std::int64_t>(),
                          size_field(body, "byte_size", true), owner);
    } else {
      if (!body.contains("key") || !body["key"].is_string())
        throw InputError("key", "missing or not a string");
      shm_->register_system(name, body["key"].get<std::string>(), size_field(body, "offset", false),
                            size_field(body, "byte_size", true), owner);
    }
    send_json(res, 200, json::object());
  });
}

void HttpRoutes::post_shm_unregister(const Req& req, Res& res, bool cuda) {
  guarded(res, [&] {
    const std::string owner = shm_owner(req);
    shm_->unregister(cuda ? Kind::cuda : Kind::system, region_param(req), owner);
    send_json(res, 200, json::object());
  });
}

}  // namespace dype::rt::daemon
