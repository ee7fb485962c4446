#include "runtime/daemon/http/http_routes.h"

#include <set>
#include <charconv>

#include "hw/device_ipc_memory.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/http/http_answer.h"
#include "runtime/daemon/graph_api.h"
#include "runtime/daemon/kserve/json_depth.h"
#include "runtime/daemon/kserve/request_builder.h"
#include "runtime/daemon/kserve/request_timing.h"
#include "runtime/daemon/kserve/tensor.h"

namespace dype::rt::daemon {
namespace {

using json = nlohmann::json;

json tensor_specs(const std::vector<TensorSpec>& specs) {
  json a = json::array();
  for (const TensorSpec& t : specs) a.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  return a;
}

json graph_json(const GraphSummary& g) {
  return {{"id", g.id},
          {"nodes", g.nodes},
          {"edges", g.edges},
          {"bytes", g.bytes},
          {"idle_s", g.idle_s},
          {"version", g.version},
          {"feature_len", g.feature_len},
          {"activation_bytes", g.activation_bytes}};
}

std::string string_field(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) throw InputError(key, "missing or not a string");
  return j[key].get<std::string>();
}

// Optional fields of a JSON body: absent is nullopt; present with the wrong type is refused.
std::optional<std::string> optional_string(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  if (!j[key].is_string()) throw InputError(key, "not a string");
  return j[key].get<std::string>();
}

std::optional<double> optional_number(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  if (!j[key].is_number()) throw InputError(key, "not a number");
  return j[key].get<double>();
}

bool optional_bool(const json& j, const char* key, bool fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_boolean()) throw InputError(key, "not true or false");
  return j[key].get<bool>();
}

std::optional<std::string> model_param(const HttpRequest& req) {
  return req.has_param("model") ? std::optional<std::string>(req.get_param_value("model")) : std::nullopt;
}

}  // namespace

// The caller as the graph registry knows it: the Dype-Graph-Owner key it chose, and its address.
GraphOwner graph_owner(const HttpRequest& req) {
  GraphOwner o{req.get_header_value("Dype-Graph-Owner"), req.peer};
  if (req.header_count("Dype-Graph-Owner") > 1) throw InputError("Dype-Graph-Owner", "sent more than once");
  if (req.has_header("Dype-Graph-Owner")) {
    if (o.key.empty() || o.key.size() > 256) throw InputError("Dype-Graph-Owner", "must be 1 to 256 characters");
    for (const char c : o.key)
      if (c < 0x21 || c > 0x7e) throw InputError("Dype-Graph-Owner", "must be printable ASCII without spaces");
  }
  return o;
}

json body_json(const HttpRequest& req) {
  if (req.body.empty()) return json::object();
  check_json_depth(req.body, "request body");
  try {
    json j = json::parse(req.body);
    if (!j.is_object()) throw InputError("request body", "must be a JSON object");
    return j;
  } catch (const json::parse_error& e) {
    throw InputError("request body", std::string("malformed JSON: ") + e.what());
  }
}

std::optional<std::size_t> header_length(const HttpRequest& req, std::size_t body_size) {
  if (!req.has_header("Inference-Header-Content-Length")) return std::nullopt;
  const std::string v = req.get_header_value("Inference-Header-Content-Length");
  std::size_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size())
    throw InputError("Inference-Header-Content-Length", "'" + v + "' is not a byte count");
  if (n > body_size)
    throw InputError("Inference-Header-Content-Length",
                     std::to_string(n) + " is past the end of the " + std::to_string(body_size) + "-byte body");
  return n;
}

// --- The route table ---------------------------------------------------------------------------

void HttpRoutes::add_to(HttpRouter& r) {
  auto route = [this](auto method) { return [this, method](const Req& req, Res& res) { (this->*method)(req, res); }; };
  const std::string model_re = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  // Cheap answers that never block run on the I/O threads; the rest on the worker pool.
  r.add("GET", "/v2/health/live", route(&HttpRoutes::get_live), RunOn::io);
  r.add("GET", "/v2/health/ready", route(&HttpRoutes::get_ready), RunOn::io);
  r.add("GET", "/v2", route(&HttpRoutes::get_server_metadata), RunOn::io);
  r.add("GET", "/v2/models", route(&HttpRoutes::get_models));
  r.add("GET", model_re, route(&HttpRoutes::get_model_metadata));
  r.add("GET", model_re + "/ready", route(&HttpRoutes::get_model_ready));
  r.add("GET", model_re + "/config", route(&HttpRoutes::get_model_config));
  // Small binary infer requests are taken on the I/O thread and answered from the engine's completion.
  r.add("POST", model_re + "/infer",
        [this](const Req& req, const std::shared_ptr<HttpReply>& reply) { return try_post_infer(req, reply); },
        route(&HttpRoutes::post_infer));
  r.add("POST", "/v2/dype/graphs", route(&HttpRoutes::post_graph));
  r.add("DELETE", "/v2/dype/graphs/([^/]+)", route(&HttpRoutes::delete_graph));
  r.add("POST", "/v2/dype/graphs/([^/]+)/update", route(&HttpRoutes::post_graph_update));
  r.add("GET", "/v2/dype/graphs", route(&HttpRoutes::get_graphs));
  r.add("DELETE", "/v2/dype/graphs", route(&HttpRoutes::delete_graphs));
  r.add("GET", "/v2/dype/admin/plan", route(&HttpRoutes::get_admin_plan));
  r.add("POST", "/v2/dype/admin/mode", route(&HttpRoutes::post_admin_mode));
  r.add("GET", "/v2/dype/admin/pareto", route(&HttpRoutes::get_admin_pareto));
  r.add("GET", "/v2/dype/admin/devices", route(&HttpRoutes::get_admin_devices));
  r.add("POST", "/v2/dype/admin/devices/([^/]+)/(drain|undrain)", route(&HttpRoutes::post_admin_drain));
  r.add("GET", "/v2/dype/admin/hosts", route(&HttpRoutes::get_admin_hosts));
  r.add("POST", "/v2/dype/admin/hosts/([^/]+)/(drain|undrain)", route(&HttpRoutes::post_admin_host_drain));
  r.add("POST", "/v2/dype/admin/bitstreams/load", route(&HttpRoutes::post_admin_load_bitstream));
  r.add("POST", "/v2/dype/admin/bitstreams/unload", route(&HttpRoutes::post_admin_unload_bitstream));
  r.add("POST", "/v2/dype/admin/images", route(&HttpRoutes::post_admin_images));
  r.add("GET", "/v2/dype/admin/graphs", route(&HttpRoutes::get_admin_graphs));
  add_shared_memory_to(r);
  add_status_to(r);
  r.add("POST", "/v2/repository/index", route(&HttpRoutes::post_repository_index));
  r.add("POST", "/v2/repository/models/([^/]+)/load", route(&HttpRoutes::post_repository_load));
  r.add("POST", "/v2/repository/models/([^/]+)/unload", route(&HttpRoutes::post_repository_unload));
}

void HttpRoutes::add_metrics_to(HttpRouter& r) {
  r.add("GET", "/metrics", [this](const Req& req, Res& res) { get_metrics(req, res); });
}

// --- Health and metadata -----------------------------------------------------------------------

void HttpRoutes::get_live(const Req&, Res& res) const { send_json(res, 200, {{"live", true}}); }

void HttpRoutes::get_ready(const Req&, Res& res) const {
  send_json(res, admission_.ready() ? 200 : 503, {{"ready", admission_.ready()}});
}

void HttpRoutes::get_server_metadata(const Req&, Res& res) const {
  json extensions = {"binary_tensor_data", "model_repository", "dype_graphs", "dype_admin", "dype_plan",
                     "system_shared_memory"};
  if (hw::gpu_ipc_built()) extensions.push_back("cuda_shared_memory");
  send_json(res, 200, {{"name", "dype"}, {"version", "0.1.0"}, {"extensions", extensions}});
}

void HttpRoutes::get_models(const Req&, Res& res) const {
  json a = json::array();
  for (const ModelInfo& m : service_.models()) a.push_back({{"name", m.name}, {"family", m.family}});
  send_json(res, 200, {{"models", a}});
}

void HttpRoutes::get_model_metadata(const Req& req, Res& res) const {
  guarded(res, [&] {
    const ModelInfo m = service_.model(req.matches[1]);
    if (req.matches[2].matched) check_version(m.name, req.matches[2].str(), m.version);
    send_json(res, 200, {{"name", m.name}, {"versions", {std::to_string(m.version)}}, {"platform", "dype_" + m.family},
                         {"inputs", tensor_specs(m.inputs)}, {"outputs", tensor_specs(m.outputs)}});
  });
}

void HttpRoutes::get_model_config(const Req& req, Res& res) const {
  guarded(res, [&] {
    const ModelInfo m = service_.model(req.matches[1]);
    if (req.matches[2].matched) check_version(m.name, req.matches[2].str(), m.version);
    const ModelSpec& spec = m.model->spec();
    json c = {{"name", m.name}, {"version", std::to_string(m.version)}, {"family", m.family}, {"layers", spec.layers}};
    if (m.model->is_gnn()) {
      c["in_features"] = spec.in_features;
      c["hidden"] = spec.hidden;
      c["out_features"] = spec.out_width();
      if (spec.family == ModelFamily::gin) c["eps"] = spec.gin_eps;
    } else {
      c["d_model"] = spec.d_model;
      c["heads"] = spec.heads;
      c["ffn"] = spec.ffn;
      c["residual_norm"] = spec.residual_norm;
      if (spec.residual_norm) {
        c["norm_first"] = spec.norm_first;
        c["layer_norm_eps"] = spec.layer_norm_eps;
      }
      if (spec.window >= 0) c["window"] = spec.window;
    }
    c["activation"] = to_string(spec.activation);
    json kernels = json::array();
    for (const Step& st : m.model->steps()) kernels.push_back({{"name", st.name}, {"op", std::string(kernels::to_string(st.op))}});
    c["kernels"] = kernels;
    send_json(res, 200, c);
  });
}

void HttpRoutes::get_model_ready(const Req& req, Res& res) const {
  guarded(res, [&] {
    const bool ok = service_.model_ready(req.matches[1]) && admission_.ready();
    send_json(res, ok ? 200 : 503, {{"name", req.matches[1].str()}, {"ready", ok}});
  });
}

void HttpRoutes::get_metrics(const Req&, Res& res) const {
  std::string extra =
      service_.metrics_text() + graphs_.metrics_text() +
      "# HELP dype_ready 1 while the daemon is ready to serve (GET /v2/health/ready).\n"
      "# TYPE dype_ready gauge\ndype_ready " +
      (admission_.ready() ? "1" : "0") + "\n";
  if (transport_) {
    const TransportCounters& c = transport_->counters();
    extra += "# HELP dype_http_connections_open HTTP connections open now.\n# TYPE dype_http_connections_open gauge\n"
             "dype_http_connections_open " + std::to_string(c.open.load()) + "\n"
             "# HELP dype_http_connections_total HTTP connections accepted, and refused beyond --max-connections.\n"
             "# TYPE dype_http_connections_total counter\n"
             "dype_http_connections_total{outcome=\"accepted\"} " + std::to_string(c.connections_accepted.load()) + "\n"
             "dype_http_connections_total{outcome=\"refused\"} " + std::to_string(c.connections_refused.load()) + "\n"
             "# HELP dype_http_timeouts_total HTTP connections closed by the idle, header, body or write timeout.\n"
             "# TYPE dype_http_timeouts_total counter\n"
             "dype_http_timeouts_total " + std::to_string(c.timeouts.load()) + "\n"
             "# HELP dype_http_bad_requests_total Requests refused by the transport (framing, limits) before routing.\n"
             "# TYPE dype_http_bad_requests_total counter\n"
             "dype_http_bad_requests_total " + std::to_string(c.bad_requests.load()) + "\n"
             "# HELP dype_http_tls_handshake_failures_total HTTPS connections closed because their TLS handshake "
             "failed (plain HTTP sent to the HTTPS port, an untrusted certificate).\n"
             "# TYPE dype_http_tls_handshake_failures_total counter\n"
             "dype_http_tls_handshake_failures_total " + std::to_string(c.tls_handshake_failures.load()) + "\n";
  }
  res.set_content(metrics_.render(extra), "text/plain; version=0.0.4");
}

// --- Graph registration ------------------------------------------------------------------------

void HttpRoutes::post_graph(const Req& req, Res& res) {
  guarded(res, [&] {
    check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
    admission_.check_serving();
    const InferRequest in =
        parse_infer_request(req.body, header_length(req, req.body.size()), false, req.body_readable_past_end);
    send_json(res, 200, register_graph(graphs_, in, graph_owner(req)));
  });
}

void HttpRoutes::post_graph_update(const Req& req, Res& res) {
  guarded(res, [&] {
    check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
    admission_.check_serving();
    const InferRequest in =
        parse_infer_request(req.body, header_length(req, req.body.size()), false, req.body_readable_past_end);
    send_json(res, 200, update_graph(graphs_, req.matches[1], in, graph_owner(req)));
  });
}

void HttpRoutes::delete_graph(const Req& req, Res& res) {
  guarded(res, [&] {
    check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
    const GraphOwner owner = graph_owner(req);
    if (!graphs_.remove(req.matches[1], &owner))
      throw NotFound("unknown graph id '" + req.matches[1].str() + "' (or registered by another owner)");
    send_json(res, 200, {{"deleted", req.matches[1].str()}});
  });
}

void HttpRoutes::get_graphs(const Req& req, Res& res) {
  guarded(res, [&] {
    check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
    json graphs = json::array();
    for (const GraphSummary& g : graphs_.list(graph_owner(req))) graphs.push_back(graph_json(g));
    send_json(res, 200, {{"graphs", graphs}});
  });
}

void HttpRoutes::delete_graphs(const Req& req, Res& res) {
  guarded(res, [&] {
    check_infer_token(req.get_header_value("Authorization"), options_.infer_token);
    send_json(res, 200, {{"deleted", graphs_.remove_all(graph_owner(req))}});
  });
}

// --- Admin -------------------------------------------------------------------------------------

template <typename Call>
void HttpRoutes::admin_call(const Req& req, Res& res, Call&& call) {
  guarded(res, [&] {
    admin_.authorize(req.get_header_value("Authorization"));
    send_json(res, 200, call());
  });
}

void HttpRoutes::get_admin_plan(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.plan(model_param(req)); });
}

void HttpRoutes::post_admin_mode(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.set_mode(string_field(body_json(req), "mode")); });
}

void HttpRoutes::get_admin_pareto(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.pareto(model_param(req)); });
}

void HttpRoutes::get_admin_devices(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.devices(); });
}

void HttpRoutes::post_admin_drain(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.drain_device(req.matches[1], req.matches[2] == "drain"); });
}

void HttpRoutes::get_admin_hosts(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.hosts(); });
}

void HttpRoutes::post_admin_host_drain(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.drain_host(req.matches[1], req.matches[2] == "drain"); });
}

void HttpRoutes::post_admin_load_bitstream(const Req& req, Res& res) {
  admin_call(req, res, [&] {
    const json j = body_json(req);
    return admin_.load_bitstream(string_field(j, "device"), string_field(j, "path"));
  });
}

void HttpRoutes::post_admin_unload_bitstream(const Req& req, Res& res) {
  admin_call(req, res, [&] { return admin_.unload_bitstream(string_field(body_json(req), "device")); });
}

void HttpRoutes::post_admin_images(const Req& req, Res& res) {
  admin_call(req, res, [&] {
    const json j = body_json(req);
    return admin_.choose_images(optional_string(j, "model"), optional_number(j, "horizon"),
                                optional_bool(j, "apply", false));
  });
}

void HttpRoutes::get_admin_graphs(const Req& req, Res& res) {
  admin_call(req, res, [&] {
    json graphs = json::array();
    for (const GraphSummary& g : graphs_.list()) {
      json j = graph_json(g);
      j["address"] = g.address;
      j["owner"] = g.keyed ? "key" : "address";
      graphs.push_back(std::move(j));
    }
    const GraphRegistryLimits& l = graphs_.limits();
    return json{{"graphs", graphs},
                {"bytes", graphs_.bytes()},
                {"activation_bytes", graphs_.activation_bytes()},
                {"limits",
                 {{"max_graphs", l.max_graphs},
                  {"max_bytes", l.max_bytes},
                  {"idle_ttl_s", l.idle_ttl_s},
                  {"owner_share", l.owner_share},
                  {"max_activation_bytes", l.max_activation_bytes},
                  {"address_share", l.address_share}}}};
  });
}

void HttpRoutes::post_repository_index(const Req& req, Res& res) {
  admin_call(req, res, [&] {
    const json j = body_json(req);
    if (j.contains("ready") && !j["ready"].is_boolean()) throw InputError("ready", "must be true or false");
    json index = admin_.repository_index();
    if (j.value("ready", false)) {
      json ready = json::array();
      for (const json& m : index)
        if (m.value("state", "") == "READY") ready.push_back(m);
      index = ready;
    }
    return index;
  });
}

void HttpRoutes::post_repository_load(const Req& req, Res& res) {
  admin_call(req, res, [&] {
    // Triton's form: {"parameters": {"config": "<the model's config, here config.yaml text>"}}.
    const json j = body_json(req);
    std::optional<std::string> config;
    if (j.contains("parameters")) {
      const json& p = j["parameters"];
      if (!p.is_object()) throw InputError("parameters", "must be an object");
      for (const auto& [k, v] : p.items()) {
        if (k != "config") throw InputError("parameters." + k, "unknown (known: config)");
        if (!v.is_string()) throw InputError("parameters.config", "must be the config.yaml text as a string");
        config = v.get<std::string>();
      }
    }
    json answer = admin_.load_model(req.matches[1], config);
    served_changed();
    return answer;
  });
}

void HttpRoutes::post_repository_unload(const Req& req, Res& res) {
  admin_call(req, res, [&] {
    body_json(req);  // any body must still be well-formed
    json answer = admin_.unload_model(req.matches[1]);
    served_changed();
    return answer;
  });
}

void HttpRoutes::served_changed() {
  std::set<std::string> names;
  for (const ModelInfo& m : service_.models()) names.insert(m.name);
  metrics_.set_served(names);
}

}  // namespace dype::rt::daemon
