// Streaming graphs through the daemon's real front ends: a graph registered with its node
// features, inference that sends no features (answered from the activations the registry keeps,
// or by the engine), node_ids, updates with versions, and every refusal the protocol promises
// (a precise 4xx, nothing applied, the daemon still serving). Answers are checked against the
// reference forward over the graph the test itself keeps.
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "../test_served_daemon.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/daemon/proto/dype_graphs.grpc.pb.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>
// After the project headers: httplib pulls in <resolv.h>, whose _res macro breaks Eigen headers.
#include <httplib.h>

using namespace dype;
using namespace dype::rt::daemon;
using json = nlohmann::json;

namespace {

constexpr std::int64_t kFeatures = 16;

rt::ModelSpec spec_of(rt::ModelFamily f) {
  return {.family = f,
          .layers = 2,
          .in_features = kFeatures,
          .hidden = 24,
          .out_features = 6,
          .gin_eps = 0.1f,
          .seed = 9};
}

EngineServiceOptions models() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  o.mode = "perf";
  o.models = {
      {"gcn", spec_of(rt::ModelFamily::gcn), {.nodes = 200, .nnz = 1000, .feature_len = kFeatures}},
      {"gin", spec_of(rt::ModelFamily::gin), {.nodes = 200, .nnz = 1000, .feature_len = kFeatures}},
      {"sage",
       spec_of(rt::ModelFamily::sage),
       {.nodes = 200, .nnz = 1000, .feature_len = kFeatures}}};
  return o;
}

// The graph as the test believes it is: edges with multiplicity and the features.
struct Truth {
  kernels::EdgeList edges;
  std::vector<float> x;
  rt::HostTensor answer(rt::ModelFamily f) const {
    const rt::Model m = rt::Model::make(spec_of(f));
    return rt::reference_forward(m,
                                 rt::Request::gnn(rt::graph_for_model(edges, m.spec()),
                                                  rt::make_tensor(edges.num_nodes, kFeatures, x)));
  }
};

json tensor_json(const std::string& name, const std::string& type, std::vector<std::int64_t> shape,
                 const json& data) {
  return {{"name", name}, {"datatype", type}, {"shape", shape}, {"data", data}};
}

json edges_json(const std::string& name,
                const std::vector<std::pair<std::int64_t, std::int64_t>>& e) {
  std::vector<std::int64_t> flat;
  for (const auto& p : e) flat.push_back(p.first);
  for (const auto& p : e) flat.push_back(p.second);
  return tensor_json(name, "INT64", {2, static_cast<std::int64_t>(e.size())}, flat);
}

class StreamingGraph : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }

  void start(GraphRegistryLimits limits) {
    daemon_ = std::make_unique<test::ServedDaemon>(models(), false, limits);
    http_ = std::make_unique<httplib::Client>("127.0.0.1", daemon_->http->http_port());
    http_->set_read_timeout(60, 0);
    truth_.edges = rt::random_graph(200, 1000, 3);
    truth_.x.resize(200 * kFeatures);
    std::mt19937 rng(1);
    for (float& v : truth_.x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    std::vector<std::int64_t> ei = truth_.edges.src;
    ei.insert(ei.end(), truth_.edges.dst.begin(), truth_.edges.dst.end());
    auto r = post("/v2/dype/graphs", {{"inputs",
                                       {tensor_json("edge_index", "INT64", {2, 1000}, ei),
                                        tensor_json("x", "FP32", {200, kFeatures}, truth_.x)}}});
    ASSERT_EQ(r.first, 200) << r.second;
    const json j = json::parse(r.second);
    id_ = j["id"];
    EXPECT_EQ(j["feature_len"], kFeatures);
    EXPECT_EQ(j["version"], 0);
  }

  std::pair<int, std::string> post(const std::string& path, const json& body,
                                   const std::string& owner = "") {
    httplib::Headers h;
    if (!owner.empty()) h.emplace("Dype-Graph-Owner", owner);
    auto r = http_->Post(path, h, body.dump(), "application/json");
    return r ? std::make_pair(r->status, r->body) : std::make_pair(-1, std::string("no answer"));
  }

  // The model's answer over the stored features (rows node_ids when given) as [rows x cols].
  rt::HostTensor infer(const std::string& model, const std::vector<std::int64_t>& node_ids = {},
                       std::optional<std::int64_t> version = std::nullopt, int expect = 200,
                       const std::string& message = "") {
    json body = {{"parameters", {{"graph_id", id_}}}, {"inputs", json::array()}};
    if (version) body["parameters"]["graph_version"] = *version;
    if (!node_ids.empty())
      body["inputs"].push_back(
          tensor_json("node_ids", "INT64", {static_cast<std::int64_t>(node_ids.size())}, node_ids));
    auto r = post("/v2/models/" + model + "/infer", body);
    EXPECT_EQ(r.first, expect) << r.second;
    if (!message.empty()) {
      EXPECT_NE(r.second.find(message), std::string::npos) << r.second;
    }
    if (r.first != 200) return {};
    const json y = json::parse(r.second)["outputs"][0];
    return rt::make_tensor(y["shape"][0], y["shape"][1], y["data"].get<std::vector<float>>());
  }

  json update(const std::vector<json>& inputs, int expect = 200, const std::string& message = "",
              const std::string& owner = "") {
    json body = {{"inputs", json::array()}};
    for (const json& t : inputs) body["inputs"].push_back(t);
    auto r = post("/v2/dype/graphs/" + id_ + "/update", body, owner);
    EXPECT_EQ(r.first, expect) << r.second;
    if (!message.empty()) {
      EXPECT_NE(r.second.find(message), std::string::npos) << r.second;
    }
    return r.first == 200 ? json::parse(r.second) : json{};
  }

  std::string metrics() {
    httplib::Client m("127.0.0.1", daemon_->http->metrics_port());
    auto r = m.Get("/metrics");
    return r ? r->body : "";
  }

  std::unique_ptr<test::ServedDaemon> daemon_;
  std::unique_ptr<httplib::Client> http_;
  Truth truth_;
  std::string id_;
};

TEST_F(StreamingGraph, StoredFeaturesAnswerWithoutXAndNodeIdsPickRows) {
  for (const auto f : {rt::ModelFamily::gcn, rt::ModelFamily::gin, rt::ModelFamily::sage}) {
    const rt::HostTensor want = truth_.answer(f);
    const rt::HostTensor y = infer(rt::to_string(f));
    EXPECT_LT(rt::relative_error(y, want), 1e-5) << rt::to_string(f);
    const std::vector<std::int64_t> ids = {5, 0, 5, 199};
    EXPECT_LT(rt::relative_error(infer(rt::to_string(f), ids), rt::take_rows(want, ids)), 1e-5)
        << rt::to_string(f);
  }
  infer("gcn", {0, 200}, std::nullopt, 400, "input 'node_ids'[1]: node 200 out of range [0, 200)");
}

TEST_F(StreamingGraph, UpdatesApplyWholeAndAnswersFollowThem) {
  infer("gcn");  // the activations are kept from here on
  const json u =
      update({edges_json("add_edges", {{1, 2}, {3, 4}, {200, 0}}),
              edges_json("remove_edges", {{truth_.edges.src[0], truth_.edges.dst[0]}}),
              tensor_json("add_nodes", "FP32", {1, kFeatures}, std::vector<float>(kFeatures, 0.5f)),
              tensor_json("set_rows", "INT64", {1}, std::vector<std::int64_t>{7}),
              tensor_json("x", "FP32", {1, kFeatures}, std::vector<float>(kFeatures, -0.25f))});
  EXPECT_EQ(u["version"], 1);
  EXPECT_EQ(u["num_nodes"], 201);
  EXPECT_EQ(u["num_edges"], 1002);
  ASSERT_TRUE(u["models"].contains("gcn")) << u.dump();
  EXPECT_GT(u["models"]["gcn"]["changed"].get<int>(), 0);
  // Priced by the model's planner both ways; a few changed rows of a 200-node graph: keeping them
  // on the CPU beats a subgraph through the emulated GPUs and FPGAs.
  EXPECT_EQ(u["models"]["gcn"]["answers"], "kept") << u.dump();
  ASSERT_TRUE(u["models"]["gcn"].contains("priced")) << u.dump();
  const json& priced = u["models"]["gcn"]["priced"];
  EXPECT_GT(priced["kept_s"].get<double>(), 0.0);
  EXPECT_LT(priced["kept_s"].get<double>(), priced["rebuild_s"].get<double>());
  EXPECT_GT(priced["pipeline_s"].get<double>(), 0.0);
  EXPECT_FALSE(priced["pipeline_plan"].get<std::string>().empty());
  // The same change to the test's own copy.
  truth_.edges.num_nodes = 201;
  truth_.edges.src.erase(truth_.edges.src.begin());
  truth_.edges.dst.erase(truth_.edges.dst.begin());
  for (auto [s, d] : std::vector<std::pair<int, int>>{{1, 2}, {3, 4}, {200, 0}}) {
    truth_.edges.src.push_back(s);
    truth_.edges.dst.push_back(d);
  }
  truth_.x.insert(truth_.x.end(), kFeatures, 0.5f);
  std::fill_n(truth_.x.begin() + 7 * kFeatures, kFeatures, -0.25f);
  for (const auto f : {rt::ModelFamily::gcn, rt::ModelFamily::gin, rt::ModelFamily::sage})
    EXPECT_LT(rt::relative_error(infer(rt::to_string(f), {}, 1), truth_.answer(f)), 1e-5)
        << rt::to_string(f);
  infer("gcn", {}, 0, 400, "parameters.graph_version: version 0 of graph '" + id_ + "' is gone");
  infer("gcn", {}, 5, 400, "does not exist yet");
}

TEST_F(StreamingGraph, BadUpdatesAreRefusedWholeAndTheDaemonServesOn) {
  const auto version = [&] {
    auto r = http_->Get("/v2/dype/graphs");
    return json::parse(r->body)["graphs"][0]["version"].get<int>();
  };
  update({edges_json("add_edges", {{0, 1}, {0, 200}})}, 400,
         "add_edges[1][1]: node 200 out of range [0, 200)");
  update({edges_json("add_edges", {{0, 1}}), edges_json("remove_edges", {{5, 5}})}, 400,
         "edge 5 -> 5 is not in the graph");
  update({tensor_json("set_rows", "INT64", {1}, std::vector<std::int64_t>{3}),
          tensor_json("x", "FP32", {1, 3}, std::vector<float>{1, 2, 3})},
         400, "x: rows of the wrong width");
  update({tensor_json("add_nodes", "FP32", {1, 4}, std::vector<float>{1, 2, 3, 4})}, 400,
         "add_nodes: new nodes need");
  update({tensor_json("x", "FP32", {1, kFeatures}, std::vector<float>(kFeatures, 0.f))}, 400,
         "name the nodes with set_rows");
  update({tensor_json("edge_index", "INT64", {2, 1}, std::vector<std::int64_t>{0, 1})}, 400,
         "not an input of a graph update");
  update({}, 400, "an update needs");
  update({tensor_json("add_nodes", "FP32", {1, 0}, json::array())}, 400,
         "at least one feature wide");
  auto empty_x =
      post("/v2/dype/graphs",
           {{"inputs",
             {tensor_json("edge_index", "INT64", {2, 1}, std::vector<std::int64_t>{0, 0}),
              tensor_json("x", "FP32", {0, kFeatures}, json::array())}}});
  EXPECT_EQ(empty_x.first, 400);
  EXPECT_NE(empty_x.second.find("input 'x': must have a row for each node, got none"),
            std::string::npos)
      << empty_x.second;
  update({edges_json("add_edges", {{0, 1}})}, 404, "unknown graph id", "someone-else");
  EXPECT_EQ(version(), 0);
  EXPECT_LT(rt::relative_error(infer("gcn"), truth_.answer(rt::ModelFamily::gcn)), 1e-5);
}

// A long random sequence over HTTP, each answer against the reference on the test's own copy.
TEST_F(StreamingGraph, RandomUpdateSequenceStaysExact) {
  std::mt19937_64 rng(7);
  for (const char* m : {"gcn", "gin", "sage"}) infer(m);
  for (int step = 0; step < 60; ++step) {
    const std::int64_t n = truth_.edges.num_nodes;
    std::vector<std::pair<std::int64_t, std::int64_t>> add, remove;
    for (int i = 0; i < 3; ++i) add.emplace_back(rng() % n, rng() % n);
    const std::size_t at = rng() % truth_.edges.src.size();
    remove.emplace_back(truth_.edges.src[at], truth_.edges.dst[at]);
    const json u = update({edges_json("add_edges", add), edges_json("remove_edges", remove)});
    ASSERT_EQ(u["version"], step + 1);
    truth_.edges.src.erase(truth_.edges.src.begin() + static_cast<std::ptrdiff_t>(at));
    truth_.edges.dst.erase(truth_.edges.dst.begin() + static_cast<std::ptrdiff_t>(at));
    for (auto [s, d] : add) {
      truth_.edges.src.push_back(s);
      truth_.edges.dst.push_back(d);
    }
    const rt::ModelFamily f = step % 3 == 0   ? rt::ModelFamily::gcn
                              : step % 3 == 1 ? rt::ModelFamily::gin
                                              : rt::ModelFamily::sage;
    ASSERT_LT(rt::relative_error(infer(rt::to_string(f)), truth_.answer(f)), 1e-5)
        << "step " << step;
  }
}

// Past the activation bound nothing is kept: the engine runs the whole graph over the stored
// features, node_ids still pick its rows, and answers follow updates all the same.
TEST_F(StreamingGraph, PastTheActivationBoundTheEngineAnswers) {
  start({.max_activation_bytes = 0});
  const std::vector<std::int64_t> ids = {3, 3, 150};
  EXPECT_LT(rt::relative_error(infer("gin", ids),
                               rt::take_rows(truth_.answer(rt::ModelFamily::gin), ids)),
            1e-5);
  const json u = update({edges_json("add_edges", {{3, 150}})});
  EXPECT_TRUE(u["models"].empty()) << u.dump();
  truth_.edges.src.push_back(3);
  truth_.edges.dst.push_back(150);
  EXPECT_LT(rt::relative_error(infer("gin", ids),
                               rt::take_rows(truth_.answer(rt::ModelFamily::gin), ids)),
            1e-5);
  EXPECT_NE(metrics().find("dype_graph_activation_bytes 0\n"), std::string::npos);
}

TEST_F(StreamingGraph, KeptActivationsAreReportedAndBounded) {
  infer("gcn");
  const std::string m = metrics();
  const auto at = m.find("\ndype_graph_activation_bytes ");
  ASSERT_NE(at, std::string::npos) << m;
  const std::size_t kept = std::stoull(m.substr(at + 29));
  // p and raw per layer (24 and 6 wide) and the answer, 4 bytes each, for 200 nodes: about 50 KB.
  EXPECT_GT(kept, 200u * (24 + 24 + 6 + 6 + 6) * 4);
  EXPECT_LT(kept, 200u * 1024);
  EXPECT_NE(m.find("dype_graph_activation_bytes_limit 1073741824"), std::string::npos);
  // Per graph in the owner's listing.
  auto r = http_->Get("/v2/dype/graphs");
  EXPECT_EQ(json::parse(r->body)["graphs"][0]["activation_bytes"].get<std::size_t>(), kept);
}

// gRPC: the same registered graph, no x, rows picked by node_ids; and with x sent, the engine.
TEST_F(StreamingGraph, GrpcInferenceReadsTheStoredGraph) {
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(daemon_->grpc->port()), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest req;
  req.set_model_name("sage");
  (*req.mutable_parameters())["graph_id"].set_string_param(id_);
  auto* ids = req.add_inputs();
  ids->set_name("node_ids");
  ids->set_datatype("INT64");
  ids->add_shape(3);
  const std::vector<std::int64_t> want_ids = {9, 1, 9};
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(want_ids.data()), 24));
  inference::ModelInferResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status st = stub->ModelInfer(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.outputs(0).shape(0), 3);
  const std::string& raw = resp.raw_output_contents(0);
  const rt::HostTensor got =
      rt::make_tensor(3, 6,
                      std::vector<float>(reinterpret_cast<const float*>(raw.data()),
                                         reinterpret_cast<const float*>(raw.data()) + 18));
  EXPECT_LT(rt::relative_error(got, rt::take_rows(truth_.answer(rt::ModelFamily::sage), want_ids)),
            1e-5);
}

// dype.graphs over gRPC: registration with features, a stream of updates answered in order (a
// refused one with its error, nothing applied, the stream going on), another owner refused.
TEST_F(StreamingGraph, GrpcRegistersAndStreamsUpdates) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc->port()),
                                     grpc::InsecureChannelCredentials());
  auto graphs = dype::graphs::DypeGraphs::NewStub(channel);
  auto tensor = [](inference::ModelInferRequest& r, const std::string& name,
                   const std::string& type, std::vector<std::int64_t> shape, const void* data,
                   std::size_t bytes) {
    auto* t = r.add_inputs();
    t->set_name(name);
    t->set_datatype(type);
    for (auto d : shape) t->add_shape(d);
    r.add_raw_input_contents(std::string(static_cast<const char*>(data), bytes));
  };
  inference::ModelInferRequest reg;
  std::vector<std::int64_t> ei = truth_.edges.src;
  ei.insert(ei.end(), truth_.edges.dst.begin(), truth_.edges.dst.end());
  tensor(reg, "edge_index", "INT64", {2, 1000}, ei.data(), ei.size() * 8);
  tensor(reg, "x", "FP32", {200, kFeatures}, truth_.x.data(), truth_.x.size() * 4);
  dype::graphs::GraphResponse out;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("dype-graph-owner", "me");
    const grpc::Status st = graphs->Register(&ctx, reg, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const std::string id = json::parse(out.json())["id"];
  EXPECT_EQ(json::parse(out.json())["feature_len"], kFeatures);
  grpc::ClientContext ctx;
  ctx.AddMetadata("dype-graph-owner", "me");
  auto stream = graphs->UpdateStream(&ctx);
  const std::vector<std::vector<std::int64_t>> adds = {
      {0, 1}, {0, 999}, {2, 3}};  // the second is out of range
  for (const auto& e : adds) {
    dype::graphs::GraphUpdateRequest u;
    u.set_graph_id(id);
    tensor(*u.mutable_tensors(), "add_edges", "INT64", {2, 1}, e.data(), 16);
    ASSERT_TRUE(stream->Write(u));
  }
  stream->WritesDone();
  std::vector<dype::graphs::GraphResponse> answers;
  for (dype::graphs::GraphResponse a; stream->Read(&a);) answers.push_back(a);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(json::parse(answers[0].json())["version"], 1);
  EXPECT_NE(answers[1].error_message().find("add_edges[1][0]: node 999 out of range [0, 200)"),
            std::string::npos)
      << answers[1].error_message();
  EXPECT_EQ(json::parse(answers[2].json())["version"], 2);
  // Another owner's graph is unknown; its owner deletes it.
  dype::graphs::GraphUpdateRequest del;
  del.set_graph_id(id);
  grpc::ClientContext other;
  other.AddMetadata("dype-graph-owner", "someone-else");
  EXPECT_EQ(graphs->Delete(&other, del, &out).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext mine;
  mine.AddMetadata("dype-graph-owner", "me");
  EXPECT_TRUE(graphs->Delete(&mine, del, &out).ok());
}

}  // namespace
