// A transformer encoder trained-layout in PyTorch (tests/scripts/transformer_reference.py:
// nn.TransformerEncoder, band mask), served from a model repository by the daemon on the paper's
// testbed (emulated GPUs, SWAT FPGAs, CPU), asked by a real HTTP client (httplib) and a real gRPC
// client (grpc++ stubs from KServe's proto): the answers equal PyTorch's within 1e-4 relative
// error, with the window from the request or, when the request names none, from the config.
// Skips, saying so, where Debian's python3-torch is not installed.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_served_daemon.h"
#include "../test_temp_dir.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "runtime/daemon/repository_models.h"

#include <httplib.h>  // after the project headers (its <resolv.h> breaks Eigen parsed later)

using namespace dype;
using json = nlohmann::json;

namespace {

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double scale = 1e-30, err = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
  }
  return err / scale;
}

class TransformerServed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "python3-torch is not installed (Debian package; scripts/setup.sh installs it)";
    const auto dir = test::process_temp_dir("dype-tf-served");
    const std::string cmd = "/usr/bin/python3 " + std::string(DYPE_SOURCE_DIR) +
                            "/tests/scripts/transformer_reference.py --d-model 32 --heads 4 --ffn 64 --layers 2 "
                            "--window 8 --seq 45 --seed 31 --dir " + dir.string() + " --name encoder";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    case_ = json::parse(std::ifstream(dir / "encoder.case.json"));
    rt::daemon::EngineServiceOptions o;
    o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
    rt::daemon::RepositoryLoad loaded = rt::daemon::repository_models({dir.string()});
    ASSERT_TRUE(loaded.failures.empty()) << loaded.failures.front();
    o.models = loaded.models;
    daemon_ = std::make_unique<test::ServedDaemon>(o);
  }
  std::vector<float> x() const { return case_.at("x").get<std::vector<float>>(); }
  std::vector<float> expected() const { return case_.at("expected").get<std::vector<float>>(); }

  json case_;
  std::unique_ptr<test::ServedDaemon> daemon_;
};

TEST_F(TransformerServed, HttpAnswersAsPytorch) {
  httplib::Client c("127.0.0.1", daemon_->http->http_port());
  const auto meta = c.Get("/v2/models/encoder");
  ASSERT_TRUE(meta);
  ASSERT_EQ(meta->status, 200) << meta->body;
  EXPECT_EQ(json::parse(meta->body)["inputs"][0]["shape"], json::array({-1, 32}));
  const auto config = c.Get("/v2/models/encoder/config");
  ASSERT_TRUE(config);
  ASSERT_EQ(config->status, 200) << config->body;
  EXPECT_NE(config->body.find("norm1"), std::string::npos) << config->body;  // LayerNorm is a kernel of the chain
  // With the window as a parameter, and without: the config's window (8) is the default.
  for (const bool with_window : {true, false}) {
    json body = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {45, 32}}, {"data", x()}}}}};
    if (with_window) body["parameters"] = {{"window", 8}};
    const auto r = c.Post("/v2/models/encoder/infer", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json out = json::parse(r->body);
    EXPECT_EQ(out["outputs"][0]["shape"], json::array({45, 32}));
    const double err = relative_error(out["outputs"][0]["data"].get<std::vector<float>>(), expected());
    EXPECT_LE(err, 1e-4) << "window " << (with_window ? "given" : "from the config");
    std::printf("HTTP, window %s: relative error vs PyTorch %s = %.2e\n", with_window ? "given" : "from config",
                case_.at("torch").get<std::string>().c_str(), err);
  }
  // Another window is another answer (PyTorch's for window 8 no longer holds).
  const json wide = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {45, 32}}, {"data", x()}}}},
                     {"parameters", {{"window", 40}}}};
  const auto r = c.Post("/v2/models/encoder/infer", wide.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_GT(relative_error(json::parse(r->body)["outputs"][0]["data"].get<std::vector<float>>(), expected()), 1e-3);
}

TEST_F(TransformerServed, GrpcAnswersAsPytorch) {
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(daemon_->grpc->port()), grpc::InsecureChannelCredentials()));
  const std::vector<float> xs = x();
  inference::ModelInferRequest q;
  q.set_model_name("encoder");
  auto* in = q.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(45);
  in->add_shape(32);
  q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(xs.data()), xs.size() * 4));
  (*q.mutable_parameters())["window"].set_int64_param(8);
  inference::ModelInferResponse r;
  grpc::ClientContext ctx;
  const grpc::Status st = stub->ModelInfer(&ctx, q, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(r.raw_output_contents_size(), 1);
  std::vector<float> y(r.raw_output_contents(0).size() / 4);
  std::memcpy(y.data(), r.raw_output_contents(0).data(), y.size() * 4);
  const double err = relative_error(y, expected());
  EXPECT_LE(err, 1e-4);
  std::printf("gRPC: relative error vs PyTorch = %.2e\n", err);
}

}  // namespace
