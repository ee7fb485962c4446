// The example repository (models/) served: GCN, GIN and GraphSAGE trained in PyTorch on Zachary's karate club
// (the graph as Debian's python3-networkx ships it). dype must give every member the class PyTorch
// gave it (models/karate/reference.json, written by scripts/train_example_models.py), so its
// accuracy equals PyTorch's: in process, and through the daemon with a real HTTP client (httplib)
// and a real gRPC client (grpc++ stubs generated from KServe's proto).
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_served_daemon.h"
#include "graph/mtx_reader.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "runtime/daemon/repository_models.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/repository/model_repository.h"

#include <httplib.h>  // after the project headers (its <resolv.h> breaks Eigen parsed later)

using namespace dype;
using json = nlohmann::json;

namespace {

const std::string kModels = std::string(DYPE_SOURCE_DIR) + "/models";

struct Karate {
  kernels::EdgeList edges;
  std::vector<int> labels;
  std::vector<bool> train;
  json reference;
  std::vector<float> identity;  // one-hot member ids, [34 x 34]
};

const Karate& karate() {
  static const Karate k = [] {
    Karate r;
    r.edges = kernels::read_mtx(kModels + "/karate/karate.mtx");
    std::ifstream labels(kModels + "/karate/labels.txt"), split(kModels + "/karate/split.txt");
    for (int c; labels >> c;) r.labels.push_back(c);
    for (std::string s; split >> s;) r.train.push_back(s == "train");
    r.reference = json::parse(std::ifstream(kModels + "/karate/reference.json"));
    const auto n = static_cast<std::size_t>(r.edges.num_nodes);
    r.identity.assign(n * n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) r.identity[i * n + i] = 1.0f;
    return r;
  }();
  return k;
}

std::vector<int> argmax_rows(const std::vector<float>& y, std::size_t cols) {
  std::vector<int> out;
  for (std::size_t r = 0; r < y.size() / cols; ++r) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < cols; ++c)
      if (y[r * cols + c] > y[r * cols + best]) best = c;
    out.push_back(static_cast<int>(best));
  }
  return out;
}

double accuracy(const std::vector<int>& pred, bool held_out_only) {
  const Karate& k = karate();
  int right = 0, total = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    if (held_out_only && k.train[i]) continue;
    ++total;
    right += pred[i] == k.labels[i];
  }
  return static_cast<double>(right) / total;
}

// dype's predictions are PyTorch's, member by member, and so are the accuracies.
void expect_as_pytorch(const std::string& model, const std::vector<int>& pred, const std::string& how) {
  const json& ref = karate().reference.at("models").at(model);
  EXPECT_EQ(pred, ref.at("predictions").get<std::vector<int>>()) << model << " " << how;
  EXPECT_DOUBLE_EQ(accuracy(pred, true), ref.at("accuracy_test").get<double>()) << model << " " << how;
  EXPECT_DOUBLE_EQ(accuracy(pred, false), ref.at("accuracy_all").get<double>()) << model << " " << how;
  std::printf("%s via %s: accuracy %.3f held out, %.3f all (PyTorch %s: %.3f, %.3f)\n", model.c_str(), how.c_str(),
              accuracy(pred, true), accuracy(pred, false), karate().reference.at("torch").get<std::string>().c_str(),
              ref.at("accuracy_test").get<double>(), ref.at("accuracy_all").get<double>());
}

TEST(ExampleModels, RepositoryHoldsTheTrainedModels) {
  const rt::ModelRepository repo({kModels});
  EXPECT_EQ(repo.index(), (std::vector<std::string>{"karate-gcn", "karate-gin", "karate-sage"}));
  for (const std::string& name : repo.index()) {
    const rt::RepositoryModel m = repo.load(name);
    EXPECT_EQ(m.version, 1);
    EXPECT_EQ(m.model->spec().in_features, 34);
    EXPECT_EQ(m.model->output_cols(), 2);
  }
}

TEST(ExampleModels, ReferenceForwardPredictsAsPytorch) {
  const rt::ModelRepository repo({kModels});
  const Karate& k = karate();
  for (const std::string& name : repo.index()) {
    const rt::RepositoryModel m = repo.load(name);
    const rt::Model& model = *m.model;
    auto g = rt::graph_for_model(k.edges, model.spec());
    const rt::HostTensor y = rt::reference_forward(model, rt::Request::gnn(g, rt::make_tensor(34, 34, k.identity)));
    expect_as_pytorch(name, argmax_rows(y.data, 2), "the CPU reference");
  }
}

class ExampleModelsServed : public ::testing::Test {
 protected:
  void SetUp() override {
    rt::daemon::EngineServiceOptions o;
    o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
    rt::daemon::RepositoryLoad loaded = rt::daemon::repository_models({kModels});
    ASSERT_TRUE(loaded.failures.empty()) << loaded.failures.front();
    o.models = loaded.models;
    daemon_ = std::make_unique<test::ServedDaemon>(o);
  }
  std::vector<std::int64_t> edge_index() const {
    std::vector<std::int64_t> e = karate().edges.src;
    e.insert(e.end(), karate().edges.dst.begin(), karate().edges.dst.end());
    return e;
  }

  std::unique_ptr<test::ServedDaemon> daemon_;
};

TEST_F(ExampleModelsServed, HttpJsonPredictsAsPytorch) {
  httplib::Client c("127.0.0.1", daemon_->http->http_port());
  for (const std::string name : {"karate-gcn", "karate-gin", "karate-sage"}) {
    const auto meta = c.Get("/v2/models/" + name);
    ASSERT_TRUE(meta);
    ASSERT_EQ(meta->status, 200) << meta->body;
    const json m = json::parse(meta->body);
    EXPECT_EQ(m["versions"], json::array({"1"}));
    EXPECT_EQ(m["outputs"][0]["shape"], json::array({-1, 2}));
    EXPECT_EQ(m["outputs"][1]["name"], "predictions");
    const std::vector<std::int64_t> e = edge_index();
    const json body = {{"inputs",
                        {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {34, 34}}, {"data", karate().identity}},
                         {{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, e.size() / 2}}, {"data", e}}}}};
    const auto r = c.Post("/v2/models/" + name + "/infer", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json out = json::parse(r->body);
    EXPECT_EQ(out["model_version"], "1");
    expect_as_pytorch(name, argmax_rows(out["outputs"][0]["data"].get<std::vector<float>>(), 2), "HTTP");
    // The config's outputs: [logits, predictions]; the arg-max classes are PyTorch's too, alone
    // when the request asks only for them.
    ASSERT_EQ(out["outputs"].size(), 2u);
    EXPECT_EQ(out["outputs"][1]["name"], "predictions");
    EXPECT_EQ(out["outputs"][1]["datatype"], "INT64");
    const auto as_int = [](const json& data) {
      std::vector<int> v;
      for (const auto& e : data) v.push_back(e.get<int>());
      return v;
    };
    expect_as_pytorch(name, as_int(out["outputs"][1]["data"]), "HTTP predictions");
    json only = body;
    only["outputs"] = {{{"name", "predictions"}}};
    const auto p = c.Post("/v2/models/" + name + "/infer", only.dump(), "application/json");
    ASSERT_TRUE(p);
    ASSERT_EQ(p->status, 200) << p->body;
    const json pred = json::parse(p->body);
    ASSERT_EQ(pred["outputs"].size(), 1u);
    expect_as_pytorch(name, as_int(pred["outputs"][0]["data"]), "HTTP predictions only");
    // Both as binary data after the JSON header: the logits' bytes, then the classes'.
    json both_binary = body;
    both_binary["parameters"] = {{"binary_data_output", true}};
    const auto b = c.Post("/v2/models/" + name + "/infer", both_binary.dump(), "application/json");
    ASSERT_TRUE(b);
    ASSERT_EQ(b->status, 200) << b->body;
    ASSERT_TRUE(b->has_header("Inference-Header-Content-Length"));
    const rt::daemon::InferResponse decoded = rt::daemon::parse_infer_response(
        b->body, std::stoul(b->get_header_value("Inference-Header-Content-Length")));
    ASSERT_EQ(decoded.outputs.size(), 2u);
    expect_as_pytorch(name, argmax_rows(decoded.outputs[0].f32(), 2), "HTTP binary logits");
    const std::vector<std::int64_t> classes = decoded.outputs[1].i64();
    expect_as_pytorch(name, std::vector<int>(classes.begin(), classes.end()), "HTTP binary predictions");
    json unknown = body;
    unknown["outputs"] = {{{"name", "probabilities"}}};
    const auto u = c.Post("/v2/models/" + name + "/infer", unknown.dump(), "application/json");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->status, 400);
    EXPECT_NE(u->body.find("has no output 'probabilities' (its outputs: y, predictions)"), std::string::npos) << u->body;
    const auto config = c.Get("/v2/models/" + name + "/versions/1/config");
    ASSERT_TRUE(config);
    ASSERT_EQ(config->status, 200) << config->body;
    const json cfg = json::parse(config->body);
    EXPECT_EQ(cfg["in_features"], 34);
    EXPECT_EQ(cfg["out_features"], 2);
    EXPECT_EQ(cfg["kernels"][0]["op"], "spmm");
    const auto no_such = c.Get("/v2/models/" + name + "/versions/9");
    ASSERT_TRUE(no_such);
    EXPECT_EQ(no_such->status, 404);
    const auto wrong = c.Post("/v2/models/" + name + "/versions/2/infer", body.dump(), "application/json");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 404) << wrong->body;
    EXPECT_NE(wrong->body.find("serving 1"), std::string::npos) << wrong->body;
  }
}

TEST_F(ExampleModelsServed, GrpcPredictsAsPytorch) {
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc->port()), grpc::InsecureChannelCredentials()));
  const std::vector<std::int64_t> e = edge_index();
  for (const std::string name : {"karate-gcn", "karate-gin", "karate-sage"}) {
    inference::ModelInferRequest q;
    q.set_model_name(name);
    auto* x = q.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(34);
    x->add_shape(34);
    q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(karate().identity.data()), 34 * 34 * 4));
    auto* ei = q.add_inputs();
    ei->set_name("edge_index");
    ei->set_datatype("INT64");
    ei->add_shape(2);
    ei->add_shape(static_cast<std::int64_t>(e.size() / 2));
    q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(e.data()), e.size() * 8));
    inference::ModelInferResponse r;
    grpc::ClientContext ctx;
    const grpc::Status st = stub->ModelInfer(&ctx, q, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(r.model_version(), "1");
    std::vector<float> y(r.raw_output_contents(0).size() / 4);
    std::memcpy(y.data(), r.raw_output_contents(0).data(), y.size() * 4);
    expect_as_pytorch(name, argmax_rows(y, 2), "gRPC");
    ASSERT_EQ(r.outputs_size(), 2);
    EXPECT_EQ(r.outputs(1).name(), "predictions");
    EXPECT_EQ(r.outputs(1).datatype(), "INT64");
    std::vector<std::int64_t> classes(r.raw_output_contents(1).size() / 8);
    std::memcpy(classes.data(), r.raw_output_contents(1).data(), classes.size() * 8);
    expect_as_pytorch(name, std::vector<int>(classes.begin(), classes.end()), "gRPC predictions");

    q.set_model_version("7");
    inference::ModelInferResponse r2;
    grpc::ClientContext ctx2;
    const grpc::Status wrong = stub->ModelInfer(&ctx2, q, &r2);
    EXPECT_EQ(wrong.error_code(), grpc::StatusCode::NOT_FOUND) << wrong.error_message();
  }
}

}  // namespace
