// dype-serve's HTTP front end end to end over real loopback sockets (127.0.0.1, ephemeral ports):
// the real EngineService on the emulated paper testbed, httplib and curl as clients. Every bad input
// is answered with its status and message, and the server keeps serving afterwards.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <latch>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "hw/emu/emu_device.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/kserve/tensor.h"
#include "../test_raw_http.h"
#include "../test_replan_counts.h"

// After the project headers: httplib pulls in <resolv.h>, whose _res macro breaks Eigen headers
// parsed after it.
#include <httplib.h>

using namespace dype;
using namespace dype::rt::daemon;
using json = nlohmann::json;
using dype::test::RawConnection;
using dype::test::RawResponse;

namespace {

EngineServiceOptions small_models() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  o.mode = "perf";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 16, .hidden = 32, .seed = 5};
  rt::ModelSpec tf{.family = rt::ModelFamily::transformer, .layers = 1, .d_model = 32, .heads = 2, .ffn = 64, .seed = 6};
  o.models = {{"gcn", gcn, {.nodes = 200, .nnz = 1000, .feature_len = 16}},
              {"swin-transformer", tf, {.feature_len = 32, .seq_len = 64, .window = 4}}};
  return o;
}

// Forwards every call to the real service but try_infer (InferenceService's default: it declines,
// so requests reach infer()); the tests' stand-ins override only what they change.
struct ForwardingService : InferenceService {
  explicit ForwardingService(InferenceService& r) : real(r) {}
  std::vector<ModelInfo> models() const override { return real.models(); }
  ModelInfo model(const std::string& n) const override { return real.model(n); }
  bool model_ready(const std::string& n) const override { return real.model_ready(n); }
  std::future<rt::HostTensor> infer(const std::string& m, rt::Request r, std::int64_t* v) override {
    return real.infer(m, std::move(r), v);
  }
  json plan(const std::string& m) const override { return real.plan(m); }
  void set_mode(const std::string& m) override { real.set_mode(m); }
  std::string mode() const override { return real.mode(); }
  std::string metrics_text() const override { return real.metrics_text(); }
  void drain() override { real.drain(); }
  InferenceService& real;
};

// Delegates to the real service; infer() can be held at a gate so tests control concurrency.
class GatedService final : public ForwardingService {
 public:
  explicit GatedService(InferenceService& r) : ForwardingService(r) {}
  std::future<rt::HostTensor> infer(const std::string& m, rt::Request r, std::int64_t* version) override {
    ++entered;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
    return real.infer(m, std::move(r), version);
  }
  // While the gate is open, the engine's own non-blocking submission (the HTTP I/O thread's path);
  // while closed, declined, so the request waits at infer() on a worker.
  bool try_infer(const std::string& m, rt::Request& r, std::int64_t* version, InferDone& done) override {
    {
      std::lock_guard lock(mu_);
      if (!open_) return false;
    }
    ++entered;
    return real.try_infer(m, r, version, done);
  }
  void open(bool o) {
    std::lock_guard lock(mu_);
    open_ = o;
    cv_.notify_all();
  }
  std::atomic<int> entered{0};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

struct Graph {
  std::int64_t n;
  std::vector<std::int64_t> edge_index;  // [2, E] row-major
  std::vector<float> x;
};

Graph make_graph(std::int64_t n, std::int64_t e, std::int64_t f, std::uint64_t seed) {
  const kernels::EdgeList el = rt::random_graph(n, e, seed);
  Graph g{n, {}, {}};
  g.edge_index = el.src;
  g.edge_index.insert(g.edge_index.end(), el.dst.begin(), el.dst.end());
  g.x.resize(static_cast<std::size_t>(n * f));
  for (std::size_t i = 0; i < g.x.size(); ++i) g.x[i] = static_cast<float>((i * 2654435761u + seed) % 1000) / 500.0f - 1.0f;
  return g;
}

class DaemonHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { service_ = new EngineService(small_models()); }
  static void TearDownTestSuite() {
    delete service_;
    service_ = nullptr;
  }

  // A server of a test's own: loopback, an ephemeral port, no metrics port.
  static ServerOptions loopback_options() {
    ServerOptions o;
    o.host = "127.0.0.1";
    o.http_port = 0;
    o.metrics_port = -1;
    return o;
  }
  void start(ServerOptions o = {}, AdminHooks hooks = {}) {
    o.host = "127.0.0.1";
    o.http_port = 0;
    o.metrics_port = 0;
    o.admin_token = "s3cret";
    gated_ = std::make_unique<GatedService>(*service_);
    server_ = std::make_unique<HttpServer>(*gated_, graphs_, metrics_, o, std::move(hooks));
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->http_port());
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    if (gated_) gated_->open(true);
    if (server_) server_->stop();
  }

  httplib::Result infer_json(const std::string& model, const json& body) {
    return client_->Post(("/v2/models/" + model + "/infer").c_str(), body.dump(), "application/json");
  }
  httplib::Result infer_binary(const std::string& model, const std::vector<Tensor>& in, const json& params,
                               httplib::Client* c = nullptr) {
    EncodedBody b = encode_infer_request("", in, params, true, true);
    httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(*b.header_length)}};
    return (c ? c : client_.get())->Post(("/v2/models/" + model + "/infer").c_str(), h, b.body, "application/octet-stream");
  }
  rt::HostTensor reference(const Graph& g) {
    const rt::Model& m = *service_->model("gcn").model;
    kernels::EdgeList el;
    el.num_nodes = g.n;
    const std::size_t e = g.edge_index.size() / 2;
    el.src.assign(g.edge_index.begin(), g.edge_index.begin() + static_cast<std::ptrdiff_t>(e));
    el.dst.assign(g.edge_index.begin() + static_cast<std::ptrdiff_t>(e), g.edge_index.end());
    return rt::reference_forward(m, rt::Request::gnn(rt::Graph::from_edges(el, true), rt::make_tensor(g.n, 16, g.x)));
  }
  rt::HostTensor output_of(const httplib::Result& r) {
    std::optional<std::size_t> hl;
    if (r->has_header("Inference-Header-Content-Length")) hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
    InferResponse resp = parse_infer_response(r->body, hl);
    const Tensor& y = resp.outputs.at(0);
    return rt::make_tensor(y.shape[0], y.shape[1], y.f32());
  }
  // Asserts status and that the error message mentions `needle`, then that a good request works.
  void expect_error(const httplib::Result& r, int status, const std::string& needle) {
    ASSERT_TRUE(r) << "no response";
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_NE(j["error"].get<std::string>().find(needle), std::string::npos) << j["error"];
    const Graph g = make_graph(30, 90, 16, 1);
    auto ok = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)}, {});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
  }

  static EngineService* service_;
  GraphRegistry graphs_;
  Metrics metrics_;
  std::unique_ptr<GatedService> gated_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};
EngineService* DaemonHttp::service_ = nullptr;

}  // namespace

TEST_F(DaemonHttp, HealthAndMetadata) {
  start();
  auto live = client_->Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(client_->Get("/v2/health/ready")->status, 200);
  const json meta = json::parse(client_->Get("/v2")->body);
  EXPECT_EQ(meta["name"], "dype");
  const auto m = client_->Get("/v2/models/gcn");
  ASSERT_EQ(m->status, 200);
  const json mj = json::parse(m->body);
  EXPECT_EQ(mj["inputs"][0]["name"], "x");
  EXPECT_EQ(mj["inputs"][0]["shape"], json({-1, 16}));
  EXPECT_EQ(client_->Get("/v2/models/gcn/ready")->status, 200);
  EXPECT_EQ(client_->Get("/v2/models/nope")->status, 404);
  EXPECT_EQ(client_->Get("/v2/models/nope/ready")->status, 404);
}

TEST_F(DaemonHttp, InferJsonAndBinaryMatchReference) {
  start();
  const Graph g = make_graph(120, 600, 16, 9);
  const rt::HostTensor ref = reference(g);
  json body = {{"id", "a1"},
               {"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {g.n, 16}}, {"data", g.x}},
                           {{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, 600}}, {"data", g.edge_index}}}}};
  auto r = infer_json("gcn", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["id"], "a1");
  EXPECT_LT(rt::relative_error(output_of(r), ref), 1e-5);

  auto b = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 600}, g.edge_index)}, {});
  ASSERT_EQ(b->status, 200) << b->body;
  EXPECT_TRUE(b->has_header("Inference-Header-Content-Length"));
  EXPECT_LT(rt::relative_error(output_of(b), ref), 1e-5);

  // Registered graph + features only.
  auto reg = client_->Post("/v2/dype/graphs",
                           json{{"parameters", {{"num_nodes", g.n}}},
                                {"inputs", {{{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, 600}}, {"data", g.edge_index}}}}}
                               .dump(),
                           "application/json");
  ASSERT_EQ(reg->status, 200) << reg->body;
  const std::string id = json::parse(reg->body)["id"];
  // Ids are "g" + 128 random bits: not guessable, never g1 again after a restart.
  EXPECT_EQ(id.size(), 33u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 1), std::string::npos) << id;
  expect_error(infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x)}, {{"graph_id", "g1"}}), 404, "unknown graph id");
  auto byid = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x)}, {{"graph_id", id}});
  ASSERT_EQ(byid->status, 200) << byid->body;
  EXPECT_LT(rt::relative_error(output_of(byid), ref), 1e-5);

  // Transformer: x + window.
  std::vector<float> tx(40 * 32);
  for (std::size_t i = 0; i < tx.size(); ++i) tx[i] = std::sin(static_cast<float>(i) * 0.1f);
  auto t = infer_binary("swin-transformer", {Tensor::from_f32("x", {40, 32}, tx)}, {{"window", 3}});
  ASSERT_EQ(t->status, 200) << t->body;
  const rt::HostTensor tref = rt::reference_forward(*service_->model("swin-transformer").model,
                                                    rt::Request::transformer(rt::make_tensor(40, 32, tx), 3));
  EXPECT_LT(rt::relative_error(output_of(t), tref), 1e-4);
}

TEST_F(DaemonHttp, BadInputsAnsweredAndServerKeepsServing) {
  ServerOptions o;
  o.max_request_bytes = 1 << 20;
  start(o);
  const Graph g = make_graph(10, 20, 16, 2);
  auto x = Tensor::from_f32("x", {g.n, 16}, g.x);
  auto ei = Tensor::from_i64("edge_index", {2, 20}, g.edge_index);
  expect_error(client_->Post("/v2/models/gcn/infer", "{\"inputs\": [", "application/json"), 400, "malformed JSON");
  expect_error(infer_json("gcn", {{"inputs", {{{"name", "x"}, {"datatype", "INT64"}, {"shape", {1, 16}}, {"data", std::vector<int>(16, 1)}}}}}),
               400, "expected FP32");
  expect_error(infer_binary("gcn", {Tensor::from_f32("x", {g.n / 2, 32}, g.x), ei}, {}), 400, "in_features = 16");
  auto bad = g.edge_index;
  bad[3] = 10;
  expect_error(infer_binary("gcn", {x, Tensor::from_i64("edge_index", {2, 20}, bad)}, {}), 400, "out of range");
  bad[3] = -4;
  expect_error(infer_binary("gcn", {x, Tensor::from_i64("edge_index", {2, 20}, bad)}, {}), 400, "edge_index");
  auto nan = g.x;
  nan[17] = std::numeric_limits<float>::quiet_NaN();
  expect_error(infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, nan), ei}, {}), 400, "NaN");
  nan[17] = std::numeric_limits<float>::infinity();
  expect_error(infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, nan), ei}, {}), 400, "infinite");
  expect_error(infer_binary("gcn", {x}, {{"graph_id", "g404"}}), 404, "unknown graph id");
  expect_error(infer_binary("nomodel", {x, ei}, {}), 404, "unknown model");
  // x rows vs graph nodes
  auto reg = client_->Post("/v2/dype/graphs",
                           json{{"inputs", {{{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, 1}}, {"data", {0, 11}}}}}}.dump(),
                           "application/json");
  ASSERT_EQ(reg->status, 200);
  expect_error(infer_binary("gcn", {x}, {{"graph_id", json::parse(reg->body)["id"]}}), 400, "12 nodes");
  // binary header length past the body
  EncodedBody b = encode_infer_request("", {x, ei}, {}, true, false);
  expect_error(client_->Post("/v2/models/gcn/infer", {{"Inference-Header-Content-Length", std::to_string(b.body.size() + 1)}},
                             b.body, "application/octet-stream"),
               400, "past the end");
  // body above --max-request-bytes
  expect_error(client_->Post("/v2/models/gcn/infer", std::string((1 << 20) + 10, ' '), "application/json"), 413,
               "max-request-bytes");
  EXPECT_GE(metrics_.count("gcn", "bad_input"), 8u);
}

// A 40 KB body of arrays nested 20,000 deep used to overflow a worker's stack and kill the daemon;
// now it is refused before parsing, wherever the nesting sits, and the server keeps serving.
TEST_F(DaemonHttp, DeeplyNestedJsonRefusedWithoutCrashing) {
  start({});
  const std::string deep = std::string(20000, '[') + "1" + std::string(20000, ']');
  const std::string in_data = R"({"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":)" + deep + "}]}";
  const std::string in_params = R"({"parameters":{"graph_id":)" + deep + R"(},"inputs":[]})";
  expect_error(client_->Post("/v2/models/gcn/infer", in_data, "application/json"), 400, "nested deeper than 64");
  expect_error(client_->Post("/v2/models/gcn/infer", in_params, "application/json"), 400, "nested deeper than 64");
  expect_error(client_->Post("/v2/dype/graphs", in_data, "application/json"), 400, "nested deeper than 64");
  const Graph g = make_graph(10, 20, 16, 2);
  auto y = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 20}, g.edge_index)}, {});
  ASSERT_TRUE(y);
  EXPECT_EQ(y->status, 200) << y->body;
}

// A declared shape far larger than the data given is refused from the counts, before anything is
// allocated for it (a [1e12, 64] shape used to end in 500 'std::bad_alloc').
TEST_F(DaemonHttp, HugeDeclaredShapesRefusedBeforeAllocating) {
  start({});
  expect_error(client_->Post("/v2/models/gcn/infer",
                             R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1000000000000,16],"data":[1,2]},)"
                             R"({"name":"edge_index","datatype":"INT64","shape":[2,1],"data":[0,1]}]})",
                             "application/json"),
               400, "inputs['x'].data: has 2 elements, shape [1000000000000,16] needs 16000000000000");
  expect_error(client_->Post("/v2/dype/graphs",
                             R"({"inputs":[{"name":"edge_index","datatype":"INT64","shape":[2,1000000000000],"data":[0,1]}]})",
                             "application/json"),
               400, "needs 2000000000000");
}

// Operators list the registered graphs (admin token), with sizes, idle times and the limits.
TEST_F(DaemonHttp, AdminListsRegisteredGraphs) {
  start({});
  const Graph g = make_graph(12, 30, 16, 3);
  const auto reg = client_->Post("/v2/dype/graphs",
                                 json{{"inputs", {{{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, 30}},
                                                   {"data", g.edge_index}}}}}.dump(),
                                 "application/json");
  ASSERT_TRUE(reg);
  ASSERT_EQ(reg->status, 200) << reg->body;
  const std::string id = json::parse(reg->body)["id"];
  const auto anon = client_->Get("/v2/dype/admin/graphs");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->status, 401);
  const auto listed = client_->Get("/v2/dype/admin/graphs", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->status, 200) << listed->body;
  const json j = json::parse(listed->body);
  bool found = false;
  for (const json& e : j["graphs"]) found |= e["id"] == id && e["nodes"] == 12 && e["edges"] == 30 && e["bytes"] == 480;
  EXPECT_TRUE(found) << j.dump();
  EXPECT_EQ(j["limits"]["max_graphs"], 1024);
}

// A client lists and deletes its own graphs: by its Dype-Graph-Owner key, else by its address; a
// graph is deleted only by its owner, and a bad key is refused naming the header.
TEST_F(DaemonHttp, ClientsListAndDeleteOnlyTheirOwnGraphs) {
  start({});
  const Graph g = make_graph(12, 30, 16, 3);
  const std::string body = json{{"inputs", {{{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, 30}},
                                             {"data", g.edge_index}}}}}.dump();
  auto reg = [&](const httplib::Headers& h) {
    const auto r = client_->Post("/v2/dype/graphs", h, body, "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r ? json::parse(r->body).value("id", "") : "";
  };
  const httplib::Headers alice{{"Dype-Graph-Owner", "alice-7f3a"}}, bob{{"Dype-Graph-Owner", "bob"}};
  const std::string a1 = reg(alice), a2 = reg(alice), b1 = reg(bob), anon = reg({});
  auto ids = [&](const httplib::Headers& h) {
    const auto r = client_->Get("/v2/dype/graphs", h);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::set<std::string> out;
    const json j = r && r->status == 200 ? json::parse(r->body) : json::object();
    for (const json& e : j.value("graphs", json::array())) out.insert(e["id"].get<std::string>());
    return out;
  };
  EXPECT_EQ(ids(alice), (std::set<std::string>{a1, a2}));
  EXPECT_EQ(ids(bob), (std::set<std::string>{b1}));
  EXPECT_EQ(ids({}), (std::set<std::string>{anon}));  // no key: known by its address

  expect_error(client_->Delete("/v2/dype/graphs/" + a1, bob), 404, "registered by another owner");
  const auto del = client_->Delete("/v2/dype/graphs/" + a1, alice);
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200) << del->body;
  const auto all = client_->Delete("/v2/dype/graphs", alice);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->status, 200) << all->body;
  EXPECT_EQ(json::parse(all->body)["deleted"], json::array({a2}));
  EXPECT_TRUE(ids(alice).empty());
  EXPECT_EQ(ids(bob), (std::set<std::string>{b1}));

  expect_error(client_->Get("/v2/dype/graphs", {{"Dype-Graph-Owner", "has space"}}), 400,
               "Dype-Graph-Owner: must be printable ASCII without spaces");
  expect_error(client_->Post("/v2/dype/graphs", {{"Dype-Graph-Owner", std::string(300, 'k')}}, body, "application/json"),
               400, "Dype-Graph-Owner: must be 1 to 256 characters");
}

TEST_F(DaemonHttp, InvalidUtf8EchoedInAnErrorStays404) {
  start();
  client_->set_url_encode(false);
  const Graph g = make_graph(30, 90, 16, 1);
  const std::vector<Tensor> in = {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)};
  // The byte 0xff is echoed in "unknown model '...'": replaced, not a 500 from the JSON writer.
  expect_error(infer_binary("bad%FFname", in, {}), 404, "unknown model 'bad");
}

TEST_F(DaemonHttp, HostileModelNamesCannotInjectMetricsOrBreakErrors) {
  start();
  client_->set_url_encode(false);
  const Graph g = make_graph(30, 90, 16, 1);
  const std::vector<Tensor> in = {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)};
  // A name that closes the label and starts a line of its own.
  expect_error(infer_binary("x%22%7D%201%0Adype_injected%7Bmodel%3D%22x", in, {}), 404, "unknown model");
  // Invalid UTF-8 echoed in the message: still 404 with a JSON error, the byte replaced.
  expect_error(infer_binary("bad%FFname", in, {}), 404, "unknown model");
  for (int i = 0; i < 20; ++i) {
    auto r = infer_binary("nosuch" + std::to_string(i), in, {});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << r->body;
  }
  httplib::Client m("127.0.0.1", server_->metrics_port());
  auto r = m.Get("/metrics");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body.find("\ndype_injected"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("nosuch"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("dype_requests_total{model=\"unknown\",result=\"not_found\"} 22"), std::string::npos) << r->body;
  EXPECT_EQ(metrics_.count("unknown", "not_found"), 22u);
}

TEST_F(DaemonHttp, FullQueueGets429AndEveryRequestAnsweredOnce) {
  ServerOptions o;
  o.max_queue = 3;
  start(o);
  gated_->open(false);
  const Graph g = make_graph(30, 90, 16, 4);
  std::vector<std::thread> ts;
  std::vector<int> status(3, 0);
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->http_port());
      c.set_read_timeout(60, 0);
      auto r = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)}, {}, &c);
      status[i] = r ? r->status : -1;
    });
  while (gated_->entered.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto over = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)}, {});
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 429);
  EXPECT_NE(over->body.find("queue full"), std::string::npos);
  gated_->open(true);
  for (auto& t : ts) t.join();
  for (int s : status) EXPECT_EQ(s, 200);
  EXPECT_EQ(metrics_.count("gcn", "overloaded"), 1u);
  EXPECT_EQ(metrics_.count("gcn", "ok"), 3u);
}

TEST_F(DaemonHttp, ShutdownRefusesNewAndFinishesInFlight) {
  start();
  gated_->open(false);
  const Graph g = make_graph(30, 90, 16, 6);
  int status = 0;
  std::thread t([&] {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    auto r = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)}, {}, &c);
    status = r ? r->status : -1;
  });
  while (gated_->entered.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  server_->begin_shutdown();
  EXPECT_EQ(client_->Get("/v2/health/ready")->status, 503);
  EXPECT_EQ(client_->Get("/v2/models/gcn/ready")->status, 503);
  auto refused = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)}, {});
  EXPECT_EQ(refused->status, 503);
  EXPECT_FALSE(server_->wait_idle(0.05));
  gated_->open(true);
  EXPECT_TRUE(server_->wait_idle(30));
  t.join();
  EXPECT_EQ(status, 200);
}

// parameters.timeout (microseconds, Triton's convention): an answer not ready that long after the
// request arrived is 504 with the reason, the server keeps serving; a bad value is 400. The
// service answers 2 s late here (its engine answer held back), so the deadline is what ends the
// wait: the 504 arrives while the answer is still held.
TEST_F(DaemonHttp, RequestTimeoutAnswers504AndKeepsServing) {
  struct Late final : ForwardingService {
    explicit Late(InferenceService& r) : ForwardingService(r) {}
    std::future<rt::HostTensor> infer(const std::string& m, rt::Request r, std::int64_t* v) override {
      auto f = std::make_shared<std::future<rt::HostTensor>>(real.infer(m, std::move(r), v));
      auto p = std::make_shared<std::promise<rt::HostTensor>>();
      std::future<rt::HostTensor> late_answer = p->get_future();
      std::thread([f, p, d = delivered] {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        try {
          p->set_value(f->get());
        } catch (...) {  // the engine stopped a request whose deadline passed (RequestCancelled)
          p->set_exception(std::current_exception());
        }
        d->store(true);
      }).detach();
      return late_answer;
    }
    std::shared_ptr<std::atomic<bool>> delivered = std::make_shared<std::atomic<bool>>(false);
  } late(*service_);
  const ServerOptions o = loopback_options();
  HttpServer server(late, graphs_, metrics_, o);
  server.start();
  httplib::Client c("127.0.0.1", server.http_port());
  const Graph g = make_graph(10, 20, 16, 2);
  const std::vector<Tensor> in = {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 20}, g.edge_index)};
  auto r = infer_binary("gcn", in, {{"timeout", 20000}}, &c);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"].get<std::string>().rfind("deadline passed before the answer", 0), 0u) << r->body;
  EXPECT_FALSE(late.delivered->load());
  for (const json& bad : {json(0), json(-5), json("soon"), json(4e9)}) {
    auto b = infer_binary("gcn", in, {{"timeout", bad}}, &c);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->status, 400) << bad;
    EXPECT_NE(b->body.find("parameters.timeout"), std::string::npos) << b->body;
  }
  auto ok = infer_binary("gcn", in, {{"timeout", 30000000}}, &c);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_GE(metrics_.count("gcn", "deadline_exceeded"), 1u);
  server.stop();
}

// A large binary request's x is read where it lies in the receive buffer, which the request then
// holds: answered early (its deadline passed before the engine took it), it still computes on its
// own x after the server has received another body of the same size (a buffer the pool would hand
// out again were it given back).
TEST_F(DaemonHttp, LargeBinaryXIsHeldByItsRequestPastAnEarlyAnswer) {
  struct Keep final : ForwardingService {
    explicit Keep(InferenceService& r) : ForwardingService(r) {}
    std::future<rt::HostTensor> infer(const std::string& m, rt::Request r,
                                      std::int64_t* v) override {
      std::lock_guard lock(mu);
      if (kept) return real.infer(m, std::move(r), v);
      kept.emplace(std::move(r));  // the first request waits here: its answer comes too late
      return never.get_future();
    }
    std::mutex mu;
    std::optional<rt::Request> kept;
    std::promise<rt::HostTensor> never;
  } keep(*service_);
  const ServerOptions o = loopback_options();
  HttpServer server(keep, graphs_, metrics_, o);
  server.start();
  httplib::Client c("127.0.0.1", server.http_port());
  // 20,000 x 16 FP32 is 1.28 MB: above inline_infer_max_bytes, so a worker builds it from the body.
  const Graph a = make_graph(20000, 60000, 16, 3);
  Graph b = a;
  b.x = make_graph(20000, 60000, 16, 4).x;
  auto body = [](const Graph& g) {
    return std::vector<Tensor>{Tensor::from_f32("x", {g.n, 16}, g.x),
                               Tensor::from_i64("edge_index", {2, 60000}, g.edge_index)};
  };
  auto early = infer_binary("gcn", body(a), {{"timeout", 50000}}, &c);
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 504) << early->body;
  auto next = infer_binary("gcn", body(b), {}, &c);
  ASSERT_TRUE(next);
  ASSERT_EQ(next->status, 200) << next->body;
  EXPECT_LT(rt::relative_error(output_of(next), reference(b)), 1e-5);
  std::optional<rt::Request> first;
  {
    std::lock_guard lock(keep.mu);
    first.swap(keep.kept);
  }
  ASSERT_TRUE(first);
  ASSERT_NE(first->mapped_input(), nullptr) << "x read in the body, not copied";
  first->set_cancel(nullptr);  // its deadline passed: run it anyway, to see which x it reads
  const rt::HostTensor late = service_->infer("gcn", std::move(*first), nullptr).get();
  EXPECT_LT(rt::relative_error(late, reference(a)), 1e-5)
      << "the first request's x was overwritten";
  server.stop();
}

// A small binary request is handed to the engine from the I/O thread without waiting and answered
// from the engine's completion (InferenceService::try_infer). Here the service holds each
// completion and the test answers it, from its own thread: requests pipelined on one connection
// are taken one at a time and answered in request order; an engine error gets its status (500 for
// a failure, 504 for a request the engine cancelled at its deadline, 400 for bad input); a
// parameters.timeout passing first answers 504 and the late completion is dropped; a request the
// engine cannot take without waiting goes to a worker that waits for it.
TEST_F(DaemonHttp, InlineInferAnsweredFromTheEngineCompletionInRequestOrder) {
  struct Held final : ForwardingService {
    explicit Held(InferenceService& r) : ForwardingService(r) {}
    std::future<rt::HostTensor> infer(const std::string& m, rt::Request r, std::int64_t* v) override {
      ++waited;
      return real.infer(m, std::move(r), v);
    }
    bool try_infer(const std::string& m, rt::Request& r, std::int64_t* v, InferDone& done) override {
      if (decline.load()) return false;
      *v = real.model(m).version;
      std::lock_guard lock(mu);
      held.push_back({r.rows(), std::move(done)});
      return true;
    }
    std::size_t count() {
      std::lock_guard lock(mu);
      return held.size();
    }
    void wait_taken(std::size_t n) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (count() < n && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ASSERT_EQ(count(), n);
    }
    // Completes the n-th request taken from another thread (as an engine's pipeline thread would),
    // then lets its completion go.
    void complete(std::size_t n, const std::function<void(InferDone&, std::int64_t rows)>& how) {
      wait_taken(n);
      std::lock_guard lock(mu);
      auto& [rows, done] = held[n - 1];
      std::thread([&how, &done, rows = rows] { how(done, rows); }).join();
      done = nullptr;
    }
    std::mutex mu;
    std::vector<std::pair<std::int64_t, InferDone>> held;
    std::atomic<bool> decline{false};
    std::atomic<int> waited{0};
  } held(*service_);
  const ServerOptions o = loopback_options();
  HttpServer server(held, graphs_, metrics_, o);
  server.start();
  const std::int64_t out = service_->model("gcn").model->spec().out_width();
  const Graph g = make_graph(30, 90, 16, 8);
  auto request = [&](const std::string& id, const json& params) {
    EncodedBody b = encode_infer_request(id, {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 90}, g.edge_index)},
                                         params, true, true);
    return "POST /v2/models/gcn/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: " +
           std::to_string(*b.header_length) + "\r\nContent-Length: " + std::to_string(b.body.size()) + "\r\n\r\n" + b.body;
  };
  auto response_of = [](const RawResponse& r) {
    std::optional<std::size_t> hl;
    if (r.headers.count("inference-header-content-length")) hl = std::stoul(r.headers.at("inference-header-content-length"));
    return parse_infer_response(r.body, hl);
  };
  auto error_of = [](const RawResponse& r) { return json::parse(r.body).value("error", ""); };
  using InferDone = InferenceService::InferDone;
  auto answer = [out](InferDone& done, std::int64_t rows) { done(rt::HostTensor::zeros(rows, out), nullptr); };
  auto fail_with = [](std::exception_ptr e) { return [e](InferDone& done, std::int64_t) { done({}, e); }; };

  RawConnection c(server.http_port(), 30);
  c.send_all(request("first", {}) + request("second", {}) + request("third", {}) + request("fourth", {}));
  held.wait_taken(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(held.count(), 1u);  // the second waits until the first is answered
  held.complete(1, answer);
  RawResponse r = c.read_response();
  ASSERT_EQ(r.status, 200) << r.body;
  const InferResponse first = response_of(r);
  EXPECT_EQ(first.id, "first");
  EXPECT_EQ(first.outputs.at(0).shape, (std::vector<std::int64_t>{g.n, out}));
  EXPECT_EQ(first.parameters.at("dype_queue_us").get<double>() < 1000.0, true);

  held.complete(2, fail_with(std::make_exception_ptr(Error("device gpu0 failed: no plan left"))));
  r = c.read_response();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(error_of(r), "device gpu0 failed: no plan left");
  held.complete(3, fail_with(std::make_exception_ptr(rt::RequestCancelled("cancelled"))));
  r = c.read_response();
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(error_of(r).rfind("deadline passed before the answer", 0), 0u) << r.body;
  held.complete(4, fail_with(std::make_exception_ptr(InputError("x", "bad row"))));
  r = c.read_response();
  EXPECT_EQ(r.status, 400);

  // parameters.timeout passes first: 504 at the deadline, the completion that comes later is dropped.
  const auto t0 = std::chrono::steady_clock::now();
  c.send_all(request("fifth", {{"timeout", 20000}}));
  r = c.read_response();
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  held.complete(5, answer);
  c.send_all(request("sixth", {}));
  held.complete(6, answer);
  r = c.read_response();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(response_of(r).id, "sixth");

  // Declined (the engine full): a worker submits it and waits.
  held.decline = true;
  c.send_all(request("seventh", {}));
  r = c.read_response();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(response_of(r).id, "seventh");
  EXPECT_EQ(held.waited.load(), 1);
  EXPECT_EQ(metrics_.count("gcn", "ok"), 3u);
  EXPECT_EQ(metrics_.count("gcn", "deadline_exceeded"), 2u);
  server.stop();
}

// dype-serve --infer-token-file: infer and graph routes need "Authorization: Bearer <token>" (401
// with the reason otherwise); health, metadata and metrics stay open.
TEST_F(DaemonHttp, InferenceTokenIsRequiredWhenSet) {
  ServerOptions o;
  o.infer_token = "t0ken";
  start(o);
  const Graph g = make_graph(10, 20, 16, 2);
  const std::vector<Tensor> in = {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 20}, g.edge_index)};
  const std::string graph_body =
      json{{"inputs", {{{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, 1}}, {"data", {0, 1}}}}}}.dump();
  for (const char* auth : {"", "Bearer wrong", "t0ken"}) {
    httplib::Client c("127.0.0.1", server_->http_port());
    if (*auth) c.set_default_headers({{"Authorization", auth}});
    auto r = infer_binary("gcn", in, {}, &c);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << auth;
    EXPECT_EQ(json::parse(r->body)["error"], "missing or wrong inference token (Authorization: Bearer <token>)");
    auto reg = c.Post("/v2/dype/graphs", graph_body, "application/json");
    ASSERT_TRUE(reg);
    EXPECT_EQ(reg->status, 401);
    auto del = c.Delete("/v2/dype/graphs/g1");
    ASSERT_TRUE(del);
    EXPECT_EQ(del->status, 401);
  }
  httplib::Client ok("127.0.0.1", server_->http_port());
  ok.set_default_headers({{"Authorization", "Bearer t0ken"}});
  auto r = infer_binary("gcn", in, {}, &ok);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto reg = ok.Post("/v2/dype/graphs", graph_body, "application/json");
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->status, 200) << reg->body;
  EXPECT_EQ(client_->Get("/v2/health/ready")->status, 200);
  EXPECT_EQ(client_->Get("/v2/models/gcn")->status, 200);
  EXPECT_GE(metrics_.count("gcn", "unauthorized"), 3u);
}

TEST_F(DaemonHttp, AdminNeedsTokenAndChangesMode) {
  start();
  EXPECT_EQ(client_->Get("/v2/dype/admin/plan")->status, 401);
  EXPECT_EQ(client_->Get("/v2/dype/admin/plan", {{"Authorization", "Bearer wrong!"}})->status, 401);
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  auto plan = client_->Get("/v2/dype/admin/plan?model=gcn", auth);
  ASSERT_EQ(plan->status, 200) << plan->body;
  const json pj = json::parse(plan->body);
  EXPECT_FALSE(pj["plans"][0]["label"].get<std::string>().empty());
  EXPECT_GE(pj["plans"][0]["stages"].size(), 1u);
  auto bad = client_->Post("/v2/dype/admin/mode", auth, R"({"mode":"fastest"})", "application/json");
  EXPECT_EQ(bad->status, 400);
  auto ok = client_->Post("/v2/dype/admin/mode", auth, R"({"mode":"energy"})", "application/json");
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(client_->Get("/v2/dype/admin/plan", auth)->body)["mode"], "energy");
  const auto records = service_->engine("gcn").replans();
  bool mode_replan = false;
  for (const auto& r : records) mode_replan = mode_replan || r.cause == "mode";
  EXPECT_TRUE(mode_replan);
  client_->Post("/v2/dype/admin/mode", auth, R"({"mode":"perf"})", "application/json");
  // Bitstream paths stay inside --bitstream-dir (none configured here).
  auto bs = client_->Post("/v2/dype/admin/bitstreams/load", auth, R"({"device":"fpga0","path":"../../etc/passwd"})",
                          "application/json");
  EXPECT_EQ(bs->status, 400);
}

TEST_F(DaemonHttp, BitstreamPathConfinement) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "dype_bitstreams_confine";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  fs::copy_file(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-gemm.yaml", dir / "sub" / "gemm.yaml");
  fs::create_symlink(std::string(DYPE_SOURCE_DIR) + "/configs/systems/local.yaml", dir / "escape.yaml");
  ServerOptions o;
  o.bitstream_dir = dir.string();
  start(o);
  EXPECT_EQ(server_->confine_bitstream_path("sub/gemm.yaml"), fs::canonical(dir / "sub" / "gemm.yaml").string());
  EXPECT_NO_THROW(server_->confine_bitstream_path((dir / "sub" / "../sub/gemm.yaml").string()));
  auto refused = [&](const std::string& p, const std::string& why) {
    try {
      server_->confine_bitstream_path(p);
      ADD_FAILURE() << p << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused("../../etc/passwd", "outside the bitstream dir");
  refused("/etc/passwd", "outside the bitstream dir");
  refused("sub/../../" + dir.filename().string() + "x/a.yaml", "outside the bitstream dir");
  refused("escape.yaml", "outside the bitstream dir");  // a symlink pointing out
  refused("missing.yaml", "not a file");
  refused("sub", "not a file");
  refused("", "empty");
  refused(std::string("sub/gemm.yaml\0x", 15), "path: contains a NUL byte");  // would open sub/gemm.yaml
  // Over the admin API the same refusal is a 400 naming the path.
  auto nul = client_->Post("/v2/dype/admin/bitstreams/load", {{"Authorization", "Bearer s3cret"}},
                           R"({"device":"fpga0","path":"sub/gemm.yaml\u0000x"})", "application/json");
  ASSERT_TRUE(nul);
  EXPECT_EQ(nul->status, 400);
  EXPECT_NE(nul->body.find("path: contains a NUL byte"), std::string::npos) << nul->body;
  EXPECT_EQ(server_->confine_bitstream_path("sub/gemm.yaml"), fs::canonical(dir / "sub" / "gemm.yaml").string());
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  auto r = client_->Post("/v2/dype/admin/bitstreams/load", auth, R"({"device":"fpga0","path":"escape.yaml"})",
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("outside the bitstream dir"), std::string::npos) << r->body;
  fs::remove_all(dir);
}

TEST_F(DaemonHttp, AdminDrainAndBitstreamSwapWithRollback) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "dype_bitstreams_swap";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/";
  for (const char* f : {"u280-sextans-gemm.yaml", "u280-sextans-swat.yaml"}) fs::copy_file(src + f, dir / f);
  {
    std::ifstream in(src + "u280-sextans-gemm.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("device_model: xilinx-u280"), 25, "device_model: xilinx-u55c");
    std::ofstream(dir / "other-board.yaml") << text;
    std::ofstream(dir / "broken.yaml") << "name: x\nkernels: [1, 2\n";
  }
  ServerOptions o;
  o.bitstream_dir = dir.string();
  start(o, admin_hooks(*service_));
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  auto post = [&](const std::string& path, const json& body) {
    auto r = client_->Post(path.c_str(), auth, body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    return r;
  };
  auto labels = [&] {
    return std::vector<std::string>{service_->engine("gcn").current_label(),
                                    service_->engine("swin-transformer").current_label()};
  };
  auto uses = [&](const std::string& device) {
    for (const char* m : {"gcn", "swin-transformer"})
      for (const auto& st : service_->engine(m).current_spec().stages)
        for (const auto* d : st.devices)
          if (d->name() == device) return true;
    return false;
  };
  const Graph g = make_graph(120, 600, 16, 9);
  const rt::HostTensor ref = reference(g);
  auto infer_ok = [&] {
    auto r = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 600}, g.edge_index)}, {});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_LT(rt::relative_error(output_of(r), ref), 1e-5);
  };
  auto* fpga0 = dynamic_cast<hw::EmuDevice*>(service_->system().find("fpga0"));
  ASSERT_NE(fpga0, nullptr);
  const std::vector<std::string> start_labels = labels();

  // Drain gpu0: no model's plan uses it, requests stay correct; undrain lets it back.
  auto d = post("/v2/dype/admin/devices/gpu0/drain", json::object());
  ASSERT_EQ(d->status, 200) << d->body;
  EXPECT_TRUE(json::parse(d->body)["drained"].get<bool>());
  EXPECT_FALSE(uses("gpu0"));
  infer_ok();
  const json devs = json::parse(client_->Get("/v2/dype/admin/devices", auth)->body);
  bool listed = false;
  for (const json& dj : devs["devices"])
    if (dj["name"] == "gpu0") listed = dj["drained"].get<bool>();
  EXPECT_TRUE(listed) << devs.dump();
  ASSERT_EQ(post("/v2/dype/admin/devices/gpu0/undrain", json::object())->status, 200);
  EXPECT_TRUE(service_->engine("gcn").drained_devices().empty());
  EXPECT_EQ(labels(), start_labels);
  EXPECT_EQ(post("/v2/dype/admin/devices/gpu9/drain", json::object())->status, 404);

  // Swap fpga0 to the GEMM image: its kernels are supported, the modelled load time is reported,
  // the FPGAs are planned as two kinds (one per image), every model re-planned.
  auto l = post("/v2/dype/admin/bitstreams/load", {{"device", "fpga0"}, {"path", "u280-sextans-gemm.yaml"}});
  ASSERT_EQ(l->status, 200) << l->body;
  const json lj = json::parse(l->body);
  EXPECT_EQ(lj["bitstream"], "u280-sextans-gemm");
  EXPECT_EQ(lj["previous"], "u280-sextans-swat");
  EXPECT_DOUBLE_EQ(lj["load_time_s"].get<double>(), 1.5);
  EXPECT_EQ(lj["load_time_source"], "modelled");
  ASSERT_NE(fpga0->bitstream(), nullptr);
  EXPECT_EQ(fpga0->bitstream()->name, "u280-sextans-gemm");
  EXPECT_TRUE(fpga0->supports(kernels::OpKind::gemm));
  EXPECT_FALSE(fpga0->supports(kernels::OpKind::window_attention));
  std::map<std::string, std::string> planned_as;
  const json listed_devices = json::parse(client_->Get("/v2/dype/admin/devices", auth)->body);
  for (const json& dj : listed_devices["devices"])
    planned_as[dj["name"].get<std::string>()] = dj["planned_as"].get<std::string>();
  EXPECT_EQ(planned_as["fpga0"], "fpga:u280-sextans-gemm");
  EXPECT_EQ(planned_as["fpga1"], "fpga:u280-sextans-swat");
  EXPECT_EQ(planned_as["gpu0"], "gpu");
  bool bitstream_replan = false;
  for (const auto& r : service_->engine("gcn").replans()) bitstream_replan |= r.cause == "bitstream";
  EXPECT_TRUE(bitstream_replan);
  infer_ok();

  // A load that fails on the device (after fpga0 was drained and the plans changed) rolls back:
  // same image, same plans, same drained sets, 409 naming the cause.
  const auto labels_before = labels();
  const auto drained_before = service_->engine("gcn").drained_devices();
  fpga0->inject_fault(0, "PCIe link reset");
  auto f = post("/v2/dype/admin/bitstreams/load", {{"device", "fpga0"}, {"path", "u280-sextans-swat.yaml"}});
  ASSERT_EQ(f->status, 409) << f->body;
  EXPECT_NE(f->body.find("PCIe link reset"), std::string::npos) << f->body;
  EXPECT_NE(f->body.find("rolled back to bitstream u280-sextans-gemm"), std::string::npos) << f->body;
  EXPECT_EQ(fpga0->bitstream()->name, "u280-sextans-gemm");
  EXPECT_EQ(labels(), labels_before);
  EXPECT_EQ(service_->engine("gcn").drained_devices(), drained_before);
  EXPECT_EQ(service_->engine("gcn").replans().back().cause, "rollback");
  infer_ok();

  // Refused before anything changes: another board's image, a broken manifest, not an FPGA, unknown device.
  auto ob = post("/v2/dype/admin/bitstreams/load", {{"device", "fpga0"}, {"path", "other-board.yaml"}});
  EXPECT_EQ(ob->status, 400);
  EXPECT_NE(ob->body.find("xilinx-u55c"), std::string::npos) << ob->body;
  EXPECT_EQ(post("/v2/dype/admin/bitstreams/load", {{"device", "fpga0"}, {"path", "broken.yaml"}})->status, 400);
  auto gpu = post("/v2/dype/admin/bitstreams/load", {{"device", "gpu0"}, {"path", "u280-sextans-swat.yaml"}});
  EXPECT_EQ(gpu->status, 400);
  EXPECT_NE(gpu->body.find("not a reconfigurable FPGA"), std::string::npos) << gpu->body;
  EXPECT_EQ(post("/v2/dype/admin/bitstreams/load", {{"device", "fpga7"}, {"path", "u280-sextans-swat.yaml"}})->status, 404);
  EXPECT_EQ(fpga0->bitstream()->name, "u280-sextans-gemm");
  EXPECT_EQ(labels(), labels_before);

  // Unload: fpga0 runs nothing and stays out of plans; loading the original image restores the
  // starting plans.
  auto u = post("/v2/dype/admin/bitstreams/unload", {{"device", "fpga0"}});
  ASSERT_EQ(u->status, 200) << u->body;
  EXPECT_EQ(fpga0->bitstream(), nullptr);
  EXPECT_FALSE(uses("fpga0"));
  infer_ok();
  auto back = post("/v2/dype/admin/bitstreams/load", {{"device", "fpga0"}, {"path", "u280-sextans-swat.yaml"}});
  ASSERT_EQ(back->status, 200) << back->body;
  EXPECT_EQ(json::parse(back->body)["previous"], "none");
  EXPECT_EQ(labels(), start_labels);
  EXPECT_TRUE(service_->engine("gcn").drained_devices().empty());
  infer_ok();
  fs::remove_all(dir);
}

// A stream during which the plan changes (drift, an operator drain) and fpga0's bitstream is
// swapped: every request is answered exactly once, in full, equal to the in-process reference.
TEST_F(DaemonHttp, StreamWithReplanAndBitstreamSwapMidStream) {
  ServerOptions o;
  o.bitstream_dir = std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams";
  start(o, admin_hooks(*service_));
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  const Graph a = make_graph(150, 600, 16, 31), b = make_graph(600, 9000, 16, 32);
  const rt::HostTensor ref_a = reference(a), ref_b = reference(b);
  const dype::test::ReplanCounts counts0 = service_->engine("gcn").replan_counts();
  constexpr int kRequests = 80;
  std::vector<int> status(kRequests, 0);
  std::vector<std::string> ids(kRequests);
  std::atomic<int> wrong{0}, sent{0};
  std::vector<std::thread> clients;
  for (int w = 0; w < 2; ++w)
    clients.emplace_back([&, w] {
      httplib::Client c("127.0.0.1", server_->http_port());
      c.set_read_timeout(60, 0);
      for (int i = w; i < kRequests; i += 2) {
        const Graph& g = i < kRequests / 2 ? a : b;
        EncodedBody body = encode_infer_request("r" + std::to_string(i),
                                                {Tensor::from_f32("x", {g.n, 16}, g.x),
                                                 Tensor::from_i64("edge_index", {2, static_cast<std::int64_t>(g.edge_index.size() / 2)}, g.edge_index)},
                                                {}, true, true);
        ++sent;
        auto r = c.Post("/v2/models/gcn/infer", {{"Inference-Header-Content-Length", std::to_string(*body.header_length)}},
                        body.body, "application/octet-stream");
        status[static_cast<std::size_t>(i)] = r ? r->status : -1;
        if (!r || r->status != 200) continue;
        std::optional<std::size_t> hl;
        if (r->has_header("Inference-Header-Content-Length")) hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
        const InferResponse resp = parse_infer_response(r->body, hl);
        ids[static_cast<std::size_t>(i)] = resp.id;
        const Tensor& y = resp.outputs.at(0);
        if (rt::relative_error(rt::make_tensor(y.shape[0], y.shape[1], y.f32()), i < kRequests / 2 ? ref_a : ref_b) > 1e-5) ++wrong;
      }
    });
  auto when_sent = [&](int n) {
    while (sent.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  when_sent(15);
  ASSERT_EQ(client_->Post("/v2/dype/admin/devices/gpu0/drain", auth, "", "application/json")->status, 200);
  when_sent(30);
  auto l = client_->Post("/v2/dype/admin/bitstreams/load", auth,
                         R"({"device":"fpga0","path":"u280-sextans-gemm.yaml"})", "application/json");
  ASSERT_EQ(l->status, 200) << l->body;
  when_sent(50);
  ASSERT_EQ(client_->Post("/v2/dype/admin/devices/gpu0/undrain", auth, "", "application/json")->status, 200);
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(status[static_cast<std::size_t>(i)], 200) << i;
    EXPECT_EQ(ids[static_cast<std::size_t>(i)], "r" + std::to_string(i));
  }
  EXPECT_EQ(wrong.load(), 0);
  const dype::test::ReplanCounts counts = service_->engine("gcn").replan_counts();
  const auto swaps = [&](const char* cause) { return dype::test::swaps_since(counts0, counts, cause); };
  EXPECT_GE(swaps("drain"), 1u);  // the plan left gpu0 mid-stream
  EXPECT_GE(swaps("bitstream") + swaps("undrain"), 1u);
  // Back to the starting image for the other tests.
  ASSERT_EQ(client_->Post("/v2/dype/admin/bitstreams/load", auth,
                          R"({"device":"fpga0","path":"u280-sextans-swat.yaml"})", "application/json")->status, 200);
}

TEST_F(DaemonHttp, CurlAndMetrics) {
  start();
  const std::string base = "http://127.0.0.1:" + std::to_string(server_->http_port());
  const std::string out = ::testing::TempDir() + "/dype_curl_out.json";
  const std::string cmd = "curl -s -o " + out + " -w '%{http_code}' -X POST -H 'Content-Type: application/json' " + base +
                          "/v2/models/gcn/infer -d '{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,16],\"data\":[" +
                          std::string("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16") +
                          "]},{\"name\":\"edge_index\",\"datatype\":\"INT64\",\"shape\":[2,2],\"data\":[0,1,1,0]}]}'";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char code[8] = {};
  ASSERT_NE(fgets(code, sizeof code, p), nullptr);
  pclose(p);
  EXPECT_STREQ(code, "200");
  std::ifstream f(out);
  const json j = json::parse(f);
  EXPECT_EQ(j["outputs"][0]["shape"], json({2, 32}));
  httplib::Client m("127.0.0.1", server_->metrics_port());
  auto r = m.Get("/metrics");
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("dype_requests_total{model=\"gcn\",result=\"ok\"} 1"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("dype_plan_epoch{model=\"gcn\"}"), std::string::npos);
  EXPECT_NE(r->body.find("dype_stage_busy_ratio"), std::string::npos);
  // The queue / compute split of the one request, and the transport's connection counters.
  EXPECT_NE(r->body.find("dype_request_split_count{model=\"gcn\"} 1"), std::string::npos) << r->body;
  for (const char* family : {"dype_request_queue_duration_us{model=\"gcn\"} ", "dype_request_compute_duration_us{model=\"gcn\"} "}) {
    const auto at = r->body.find(family);
    ASSERT_NE(at, std::string::npos) << family;
    EXPECT_GT(std::stod(r->body.substr(at + std::string(family).size())), 0.0) << family;
  }
  EXPECT_NE(r->body.find("dype_http_connections_total{outcome=\"accepted\"}"), std::string::npos);
  EXPECT_NE(r->body.find("dype_http_connections_open "), std::string::npos);
}

TEST_F(DaemonHttp, DriftingStreamTriggersReplan) {
  start();
  const auto before = service_->engine("gcn").replans().size();
  // Sparse graphs, then much denser ones: the drift detector must notice the nnz change.
  const Graph a = make_graph(200, 800, 16, 11);
  const Graph b = make_graph(400, 12000, 16, 12);
  const rt::HostTensor ref_b = reference(b);
  int answered = 0;
  for (int i = 0; i < 60; ++i) {
    const Graph& g = i < 20 ? a : b;
    auto r = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x),
                                  Tensor::from_i64("edge_index", {2, static_cast<std::int64_t>(g.edge_index.size() / 2)}, g.edge_index)},
                          {});
    ASSERT_EQ(r->status, 200) << r->body;
    ++answered;
    if (i >= 20) {
      EXPECT_LT(rt::relative_error(output_of(r), ref_b), 1e-5);
    }
  }
  EXPECT_EQ(answered, 60);
  const auto records = service_->engine("gcn").replans();
  bool drift = false;
  for (std::size_t i = before; i < records.size(); ++i) drift = drift || records[i].cause == "drift";
  EXPECT_TRUE(drift) << "no drift re-plan among " << records.size() - before << " new records";
}

// The transport reads a body straight from the connection's socket after the bytes that came with
// the headers. Over a raw socket: a body arriving in pieces, small bodies arriving with their
// headers (already in the header buffer), a chunked body (Beast's parser reads it), and a body cut
// short, each answered correctly, with the server's timing parameters consistent.
namespace {

std::string infer_request_bytes(const EncodedBody& b, const std::string& model = "gcn") {
  return "POST /v2/models/" + model + "/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
         "Inference-Header-Content-Length: " + std::to_string(*b.header_length) + "\r\nContent-Length: " +
         std::to_string(b.body.size()) + "\r\n\r\n" + b.body;
}

}  // namespace

TEST_F(DaemonHttp, BodiesReadFromTheSocketInPiecesWholeChunkedAndShort) {
  start();
  const Graph g = make_graph(300, 1500, 16, 21);  // ~31 KB body: several socket reads
  const rt::HostTensor ref = reference(g);
  const EncodedBody big = encode_infer_request(
      "", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 1500}, g.edge_index)}, {}, true, true);
  auto check = [&](const RawResponse& r, const rt::HostTensor& want) {
    ASSERT_EQ(r.status, 200) << r.body;
    const InferResponse resp = parse_infer_response(r.body, std::stoul(r.headers.at("inference-header-content-length")));
    const Tensor& y = resp.outputs.at(0);
    EXPECT_LT(rt::relative_error(rt::make_tensor(y.shape[0], y.shape[1], y.f32()), want), 1e-5);
    // Server time covers the phases it reports and the engine time (each rounded to 0.1 us).
    const json& p = resp.parameters;
    const double parts = p.at("dype_receive_us").get<double>() + p.at("dype_parse_us").get<double>() +
                         p.at("dype_build_us").get<double>() + p.at("dype_engine_time_us").get<double>();
    EXPECT_GE(p.at("dype_server_time_us").get<double>() + 0.2, parts) << p.dump();
    EXPECT_GT(p.at("dype_server_cpu_us").get<double>(), 0.0) << p.dump();
  };

  {  // in pieces: headers with a few body bytes, then the rest later, twice on one connection
    SCOPED_TRACE("in pieces");
    RawConnection c(server_->http_port());
    const std::string req = infer_request_bytes(big);
    for (int i = 0; i < 2; ++i) {
      const std::size_t split = req.find("\r\n\r\n") + 4 + 100;
      c.send_all(std::string_view(req).substr(0, split));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      c.send_all(std::string_view(req).substr(split));
      check(c.read_response(), ref);
    }
  }
  {  // small bodies sent with their headers in one write: all already in httplib's buffer.
     // (Not two requests in one write: httplib 0.11 polls the socket before serving a pipelined
     // request from its buffer, so the second waits out its 5 s read timeout, on every route.)
    SCOPED_TRACE("body with headers");
    const Graph s = make_graph(12, 30, 16, 5);
    const EncodedBody small = encode_infer_request(
        "", {Tensor::from_f32("x", {s.n, 16}, s.x), Tensor::from_i64("edge_index", {2, 30}, s.edge_index)}, {}, true, true);
    RawConnection c(server_->http_port());
    const rt::HostTensor sref = reference(s);
    for (int i = 0; i < 2; ++i) {
      c.send_all(infer_request_bytes(small));
      check(c.read_response(), sref);
    }
  }
  {  // chunked: httplib decodes it, through the handler's other path
    const std::string body = big.body;
    auto r = client_->Post("/v2/models/gcn/infer", {{"Inference-Header-Content-Length", std::to_string(*big.header_length)}},
                           [&body](std::size_t offset, httplib::DataSink& sink) {
                             if (offset < body.size())
                               sink.write(body.data() + offset, std::min<std::size_t>(7000, body.size() - offset));
                             else
                               sink.done();
                             return true;
                           },
                           "application/octet-stream");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_LT(rt::relative_error(output_of(r), ref), 1e-5);
  }
  {  // cut short: Content-Length promises more than arrives before the client stops writing
    RawConnection c(server_->http_port());
    const std::string req = infer_request_bytes(big);
    c.send_all(std::string_view(req).substr(0, req.size() - 5000));
    c.end_writes();
    const RawResponse r = c.read_response();
    if (r.status != 0) {  // answered (400) or closed: either way nothing was run on half a body
      EXPECT_EQ(r.status, 400) << r.body;
      EXPECT_NE(r.body.find("could not be read in full"), std::string::npos) << r.body;
    }
  }
  auto after = infer_binary("gcn", {Tensor::from_f32("x", {g.n, 16}, g.x), Tensor::from_i64("edge_index", {2, 1500}, g.edge_index)}, {});
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200) << after->body;
}

// x read where it lies in a body received a socket read at a time: a NaN or Inf is found wherever
// the reads cut the body (in the bytes sent with the headers, in a value split between two reads,
// in the last read) and named by its row and column, and finite x is answered as before, on one
// connection throughout.
TEST_F(DaemonHttp, NonFiniteFeaturesAreFoundWhereverTheBodysReadsCutThem) {
  ServerOptions o = loopback_options();
  o.inline_infer_max_bytes = 1024;  // built by a worker from the body, x read where it lies
  start(o);
  const Graph g = make_graph(300, 1500, 16, 23);
  const rt::HostTensor ref = reference(g);
  auto body_of = [&](const std::vector<float>& x) {
    return encode_infer_request(
        "", {Tensor::from_f32("x", {g.n, 16}, x), Tensor::from_i64("edge_index", {2, 1500}, g.edge_index)}, {}, true,
        true);
  };
  const EncodedBody good = body_of(g.x);
  const std::size_t x_at = *good.header_length;  // x is the first binary tensor
  const std::string head = infer_request_bytes(good).substr(0, infer_request_bytes(good).find("\r\n\r\n") + 4);
  // The reads: headers and x's first 10 bytes (value 2 cut), then 4097 bytes at a time.
  const std::size_t first = x_at + 10, piece = 4097;
  const std::size_t cut_value = (first + piece - x_at) / 4;  // the value the second read's end cuts
  RawConnection c(server_->http_port());
  auto send_in_reads = [&](const EncodedBody& b) {
    const std::string req = infer_request_bytes(b);
    std::size_t at = head.size() + first;
    c.send_all(std::string_view(req).substr(0, at));
    while (at < req.size()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      const std::size_t n = std::min(piece, req.size() - at);
      c.send_all(std::string_view(req).substr(at, n));
      at += n;
    }
    return c.read_response();
  };
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
  for (const std::size_t value : {std::size_t{0}, std::size_t{2}, cut_value, g.x.size() / 2, g.x.size() - 1}) {
    for (const float bad : kBad) {
      SCOPED_TRACE("value " + std::to_string(value) + (std::isnan(bad) ? " NaN" : " -Inf"));
      std::vector<float> x = g.x;
      x[value] = bad;
      const RawResponse r = send_in_reads(body_of(x));
      EXPECT_EQ(r.status, 400) << r.body;
      const std::string where = "input 'x'[" + std::to_string(value / 16) + "][" + std::to_string(value % 16) + "]";
      EXPECT_NE(r.body.find(where), std::string::npos) << r.body;
      EXPECT_NE(r.body.find(std::isnan(bad) ? "NaN" : "infinite"), std::string::npos) << r.body;
      const RawResponse ok = send_in_reads(good);
      ASSERT_EQ(ok.status, 200) << ok.body;
      const InferResponse resp =
          parse_infer_response(ok.body, std::stoul(ok.headers.at("inference-header-content-length")));
      const Tensor& y = resp.outputs.at(0);
      EXPECT_LT(rt::relative_error(rt::make_tensor(y.shape[0], y.shape[1], y.f32()), ref), 1e-5);
    }
  }
}

// Header abuse refused before any body is read, each answered with its status and message, and
// a good request answered after each.
TEST_F(DaemonHttp, ContentLengthTwiceOrMissingIsRefused) {
  start();
  const Graph s = make_graph(12, 30, 16, 5);
  const EncodedBody small = encode_infer_request(
      "", {Tensor::from_f32("x", {s.n, 16}, s.x), Tensor::from_i64("edge_index", {2, 30}, s.edge_index)}, {}, true, true);
  const std::string good = infer_request_bytes(small);
  auto answered_after = [&] {
    RawConnection c(server_->http_port());
    c.send_all(good);
    EXPECT_EQ(c.read_response().status, 200);
  };
  {  // two different lengths: which one frames the body is ambiguous (request smuggling)
    RawConnection c(server_->http_port());
    std::string req = good;
    req.insert(req.find("\r\n\r\n"), "\r\nContent-Length: 7");
    c.send_all(req);
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("Content-Length: malformed, sent more than once with different values"),
              std::string::npos) << r.body;
  }
  answered_after();
  {  // the same length twice is one length
    RawConnection c(server_->http_port());
    std::string req = good;
    req.insert(req.find("\r\n\r\n"), "\r\nContent-Length: " + std::to_string(small.body.size()));
    c.send_all(req);
    EXPECT_EQ(c.read_response().status, 200);
  }
  {  // HTTP/1.0 POST with no length: was never answered; now 411
    RawConnection c(server_->http_port());
    c.send_all("POST /v2/models/gcn/infer HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n{\"inputs\":[]}");
    const RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 411) << r.body;
    EXPECT_EQ(json::parse(r.body)["error"], "Content-Length: required (or Transfer-Encoding: chunked)");
  }
  answered_after();
}
