#pragma once
// The HTTP front end's routes (see http_server.h for the list and the error statuses): one named
// handler per route, registered by add_to(). http_routes.cpp holds the route table and the small
// routes; http_infer.cpp the infer route, step by step. HttpServer owns one and registers it:
//
//   HttpRoutes routes(service, graphs, metrics, options, admission, admin);
//   routes.add_to(api_router);                 // the API port
//   routes.add_metrics_to(metrics_router);     // GET /metrics on the metrics port
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/admission.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/daemon/http/http_message.h"
#include "runtime/daemon/http/http_router.h"
#include "runtime/daemon/http/http_transport.h"
#include "runtime/daemon/http/server_options.h"
#include "runtime/daemon/metrics.h"
#include "runtime/daemon/service.h"
#include "runtime/daemon/kserve/tensor.h"

namespace dype::rt::daemon {

struct InferTimes;
struct InferCall;

class SharedMemoryRegistry;

// The caller as the graph registry (and the shared-memory regions) know it: the Dype-Graph-Owner
// key it chose, and its address. InputError for a malformed key.
GraphOwner graph_owner(const HttpRequest& req);
// A JSON object body (an empty body: {}); InputError naming the body otherwise.
nlohmann::json body_json(const HttpRequest& req);

class HttpRoutes {
 public:
  HttpRoutes(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, const ServerOptions& options,
             AdmissionControl& admission, AdminApi& admin)
      : service_(service),
        graphs_(graphs),
        metrics_(metrics),
        options_(options),
        admission_(admission),
        admin_(admin) {
    std::set<std::string> names;
    for (const ModelInfo& m : service.models()) names.insert(m.name);
    metrics.set_served(names);
  }

  // Every API route.
  void add_to(HttpRouter& router);
  // GET /metrics.
  void add_metrics_to(HttpRouter& router);
  // The status page: GET / and /ui (to /ui/), /ui/{file}, and the JSON it polls, GET /v2/dype/status
  // (http_status_page.cpp).
  void add_status_to(HttpRouter& router);
  // The shared-memory regions infer requests may name (none: shared memory is refused).
  void set_shared_memory(SharedMemoryRegistry* shm) { shm_ = shm; }
  // The transport whose connection counters /metrics reports (may stay unset).
  void set_transport(const HttpTransport* transport) { transport_ = transport; }

 private:
  using Req = HttpRequest;
  using Res = HttpResponse;

  // Health and metadata.
  void get_live(const Req& req, Res& res) const;
  void get_ready(const Req& req, Res& res) const;
  void get_server_metadata(const Req& req, Res& res) const;
  void get_models(const Req& req, Res& res) const;
  void get_model_metadata(const Req& req, Res& res) const;
  void get_model_ready(const Req& req, Res& res) const;
  // The served version's configuration: family, sizes and the kernel chain the scheduler plans.
  void get_model_config(const Req& req, Res& res) const;
  void get_metrics(const Req& req, Res& res) const;

  // Inference (http_infer.cpp): receive the body, check, admit, parse, run, encode, send. On a
  // worker (post_infer), or taken on the I/O thread and answered from the engine's completion
  // (try_post_infer: small binary requests with binary outputs; false for the others).
  void post_infer(const Req& req, Res& res);
  bool try_post_infer(const Req& req, const std::shared_ptr<HttpReply>& reply);
  bool start_infer(const Req& req, const std::shared_ptr<InferCall>& call);
  // `submitted`: when a worker handed the request to the engine (times are written only by the one
  // that answers).
  void finish_infer(InferCall& call, HostTensor y, std::exception_ptr error,
                    std::optional<std::chrono::steady_clock::time_point> submitted = std::nullopt);
  void answer_infer(const Req& req, Res& res, const std::string& model, InferTimes& times);
  void encode_infer(Res& res, const std::string& model, std::int64_t version, const InferRequest& in,
                    const std::vector<std::string>& names, HostTensor y, const InferTimes& times) const;
  void record_infer(const std::string& model, const std::string& reason, const InferTimes& times);
  std::int64_t check_infer_target(const Req& req, const std::string& model) const;

  // The system and CUDA shared-memory extensions (http_shared_memory.cpp).
  void add_shared_memory_to(HttpRouter& router);
  void get_shm_status(const Req& req, Res& res, bool cuda);
  void post_shm_register(const Req& req, Res& res, bool cuda);
  void post_shm_unregister(const Req& req, Res& res, bool cuda);
  // The client a region belongs to (graph_owner's id); with the infer token checked.
  std::string shm_owner(const Req& req) const;

  // The status page (http_status_page.cpp): its built-in files, and what it shows (the
  // --ui-token-file token checked when set).
  void get_status_file(const Req& req, Res& res) const;
  void get_status(const Req& req, Res& res);

  // Graph registration.
  void post_graph(const Req& req, Res& res);
  void post_graph_update(const Req& req, Res& res);
  void delete_graph(const Req& req, Res& res);
  void get_graphs(const Req& req, Res& res);     // the caller's graphs (Dype-Graph-Owner, else its address)
  void delete_graphs(const Req& req, Res& res);  // all of them

  // Admin (token checked first; AdminApi runs one call at a time).
  template <typename Call>
  void admin_call(const Req& req, Res& res, Call&& call);
  void get_admin_plan(const Req& req, Res& res);
  void post_admin_mode(const Req& req, Res& res);
  void get_admin_pareto(const Req& req, Res& res);
  void get_admin_devices(const Req& req, Res& res);
  void post_admin_drain(const Req& req, Res& res);
  void get_admin_hosts(const Req& req, Res& res);
  void post_admin_host_drain(const Req& req, Res& res);
  void post_admin_load_bitstream(const Req& req, Res& res);
  void post_admin_unload_bitstream(const Req& req, Res& res);
  void post_admin_images(const Req& req, Res& res);
  // Every registered graph with its size and idle time, and the registry's limits.
  void get_admin_graphs(const Req& req, Res& res);
  // The model repository extension (POST /v2/repository/index, .../models/{m}/load|unload).
  void post_repository_index(const Req& req, Res& res);
  void post_repository_load(const Req& req, Res& res);
  void post_repository_unload(const Req& req, Res& res);
  // Metrics count requests per served model: tell it the models after a load or unload.
  void served_changed();

  InferenceService& service_;
  GraphRegistry& graphs_;
  Metrics& metrics_;
  const ServerOptions& options_;
  AdmissionControl& admission_;
  AdminApi& admin_;
  const HttpTransport* transport_ = nullptr;
  SharedMemoryRegistry* shm_ = nullptr;
};

// The Inference-Header-Content-Length header, checked against the body's size (InputError).
std::optional<std::size_t> header_length(const HttpRequest& req, std::size_t body_size);

}  // namespace dype::rt::daemon
