// Model management while serving, end to end: the model repository extension over HTTP (httplib)
// and gRPC (grpc++ stubs of Triton's RPCs). A reload under a running request stream loses,
// fails or repeats no request; each answer says which version produced it and equals that
// version's reference output; a failed reload leaves the serving version untouched; unload stops
// the model and load brings it back; every call needs the admin token.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_run_cli.h"
#include "../test_safetensors_file.h"
#include "../test_temp_dir.h"
#include "graph/mtx_reader.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "runtime/daemon/repository_models.h"
#include "runtime/repository/model_repository.h"
#include "runtime/repository/safetensors.h"

#include <httplib.h>  // after the project headers (its <resolv.h> breaks Eigen parsed later)

using namespace dype;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kToken = "s3cret";
const std::string kModels = std::string(DYPE_SOURCE_DIR) + "/models";

// The karate GCN's weights times `scale` as version `version` of model "m" in `repo`.
void write_version(const fs::path& repo, int version, float scale) {
  const rt::SafetensorsFile f = rt::SafetensorsFile::open(kModels + "/karate-gcn/model.safetensors");
  std::vector<test::F32Tensor> tensors;
  for (const std::string& name : f.names()) {
    std::vector<float> v = f.to_f32(name);
    for (float& x : v) x *= scale;
    tensors.push_back({name, f.tensor(name).shape, v});
  }
  fs::create_directories(repo / "m" / std::to_string(version));
  test::write_safetensors(repo / "m" / std::to_string(version) / "model.safetensors", tensors);
}

class ModelReload : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = test::process_temp_dir("dype-reload") / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(repo_);
    fs::create_directories(repo_ / "m");
    fs::copy_file(kModels + "/karate-gcn/config.yaml", repo_ / "m" / "config.yaml");
    write_version(repo_, 1, 1.0f);
    rt::daemon::EngineServiceOptions o;
    o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
    o.repositories = {repo_.string()};
    o.models = rt::daemon::repository_models(o.repositories).models;
    service_ = std::make_unique<rt::daemon::EngineService>(o);
    rt::daemon::ServerOptions so;
    so.host = "127.0.0.1";
    so.http_port = 0;
    so.metrics_port = -1;
    so.admin_token = kToken;
    http_ = std::make_unique<rt::daemon::HttpServer>(*service_, graphs_, metrics_, so,
                                                     rt::daemon::admin_hooks(*service_));
    http_->start();
    admin_ = std::make_unique<rt::daemon::AdminApi>(*service_, rt::daemon::admin_hooks(*service_), kToken, "");
    grpc_ = std::make_unique<rt::daemon::GrpcServer>(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0,
                                                     64u << 20, admin_.get());
    grpc_->start();
    const kernels::EdgeList e = kernels::read_mtx(kModels + "/karate/karate.mtx");
    edge_index_ = e.src;
    edge_index_.insert(edge_index_.end(), e.dst.begin(), e.dst.end());
    identity_.assign(34 * 34, 0.0f);
    for (int i = 0; i < 34; ++i) identity_[static_cast<std::size_t>(i * 35)] = 1.0f;
  }
  void TearDown() override {
    if (grpc_) grpc_->stop(1.0);
    if (http_) http_->stop();
  }

  // The reference answer of version v (as the repository holds it now).
  rt::HostTensor expected(int version) {
    const std::string config = "family: gcn\nin_features: 34\nhidden: 16\nout_features: 2\nlayers: 2\nversion: " +
                               std::to_string(version) + "\n";
    const rt::RepositoryModel m = rt::ModelRepository({repo_.string()}).load("m", config);
    const kernels::EdgeList e = kernels::read_mtx(kModels + "/karate/karate.mtx");
    return rt::reference_forward(*m.model,
                                 rt::Request::gnn(rt::Graph::from_edges(e, true), rt::make_tensor(34, 34, identity_)));
  }
  json infer_body() const {
    return {{"inputs",
             {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {34, 34}}, {"data", identity_}},
              {{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, edge_index_.size() / 2}}, {"data", edge_index_}}}}};
  }
  httplib::Result admin_post(httplib::Client& c, const std::string& path, const std::string& body = "",
                             const std::string& token = kToken) {
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return c.Post(path, h, body, "application/json");
  }

  fs::path repo_;
  std::unique_ptr<rt::daemon::EngineService> service_;
  rt::daemon::GraphRegistry graphs_;
  rt::daemon::Metrics metrics_;
  std::unique_ptr<rt::daemon::HttpServer> http_;
  std::unique_ptr<rt::daemon::AdminApi> admin_;
  std::unique_ptr<rt::daemon::GrpcServer> grpc_;
  std::vector<std::int64_t> edge_index_;
  std::vector<float> identity_;
};

TEST_F(ModelReload, ReloadUnderAStreamLosesNothingAndEachAnswerNamesItsVersion) {
  const rt::HostTensor v1 = expected(1);
  write_version(repo_, 2, -0.5f);
  const rt::HostTensor v2 = expected(2);
  ASSERT_GT(rt::relative_error(v1, v2), 0.1);  // the versions answer differently

  struct Answer {
    int status = 0;
    std::string version;
    double error = 1.0;
  };
  constexpr int kClients = 3, kPerClient = 40;
  std::vector<std::vector<Answer>> answers(kClients);
  std::atomic<int> sent{0};
  const std::string body = infer_body().dump();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", http_->http_port());
      for (int i = 0; i < kPerClient; ++i) {
        const auto r = client.Post("/v2/models/m/infer", body, "application/json");
        ++sent;
        Answer a;
        if (r) {
          a.status = r->status;
          if (r->status == 200) {
            const json j = json::parse(r->body);
            a.version = j["model_version"];
            const rt::HostTensor y = rt::make_tensor(34, 2, j["outputs"][0]["data"].get<std::vector<float>>());
            a.error = rt::relative_error(y, a.version == "2" ? v2 : v1);
          }
        }
        answers[static_cast<std::size_t>(c)].push_back(a);
      }
    });
  }
  while (sent < kClients * kPerClient / 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  httplib::Client admin("127.0.0.1", http_->http_port());
  const auto load = admin_post(admin, "/v2/repository/models/m/load");
  for (auto& t : clients) t.join();
  ASSERT_TRUE(load);
  ASSERT_EQ(load->status, 200) << load->body;
  const json l = json::parse(load->body);
  EXPECT_EQ(l["version"], "2");
  EXPECT_EQ(l["previous_version"], "1");
  std::printf("reload under load: built in %.1f ms, admission paused %.3f ms, old version drained in %.1f ms (measured)\n",
              l["load_s"].get<double>() * 1e3, l["switch_pause_s"].get<double>() * 1e3,
              l["old_version_drain_s"].get<double>() * 1e3);

  int by_v1 = 0, by_v2 = 0;
  for (const auto& per_client : answers) {
    ASSERT_EQ(per_client.size(), static_cast<std::size_t>(kPerClient));  // every request answered once
    bool seen_v2 = false;
    for (const Answer& a : per_client) {
      ASSERT_EQ(a.status, 200) << "a request failed during the reload";
      EXPECT_LE(a.error, 1e-5) << "version " << a.version << " answered with another version's output";
      if (a.version == "2") seen_v2 = true;
      EXPECT_FALSE(seen_v2 && a.version == "1") << "a client's later request went back to version 1";
      (a.version == "2" ? by_v2 : by_v1)++;
    }
  }
  EXPECT_GT(by_v1, 0);
  EXPECT_GT(by_v2, 0);
  EXPECT_EQ(by_v1 + by_v2, kClients * kPerClient);
  const auto meta = admin.Get("/v2/models/m");
  ASSERT_TRUE(meta);
  EXPECT_EQ(json::parse(meta->body)["versions"], json::array({"2"}));
}

TEST_F(ModelReload, FailedReloadKeepsServingUnloadAndLoadAgainNeedTheToken) {
  httplib::Client c("127.0.0.1", http_->http_port());
  const std::string body = infer_body().dump();
  // Without the token: refused, nothing changes.
  const auto anon = admin_post(c, "/v2/repository/models/m/load", "", "");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->status, 401);
  // A broken version 2 (NaN weight): refused naming the tensor; version 1 keeps serving.
  write_version(repo_, 2, std::nanf(""));
  const auto bad = admin_post(c, "/v2/repository/models/m/load");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_NE(bad->body.find("NaN at flat index 0"), std::string::npos) << bad->body;
  const auto still = c.Post("/v2/models/m/infer", body, "application/json");
  ASSERT_TRUE(still);
  ASSERT_EQ(still->status, 200) << still->body;
  EXPECT_EQ(json::parse(still->body)["model_version"], "1");
  // The index says READY at version 1; a config given with the load pins version 1 explicitly.
  const auto index = admin_post(c, "/v2/repository/index");
  ASSERT_TRUE(index);
  ASSERT_EQ(index->status, 200) << index->body;
  EXPECT_EQ(json::parse(index->body), json::parse(R"([{"name": "m", "version": "1", "state": "READY", "reason": ""}])"));
  const json pinned = {{"parameters",
                        {{"config", "family: gcn\nin_features: 34\nhidden: 16\nout_features: 2\nlayers: 2\nversion: 1\n"}}}};
  const auto again = admin_post(c, "/v2/repository/models/m/load", pinned.dump());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
  // Unload: the model is gone (404), the index says UNAVAILABLE; load brings it back.
  const auto unload = admin_post(c, "/v2/repository/models/m/unload");
  ASSERT_TRUE(unload);
  ASSERT_EQ(unload->status, 200) << unload->body;
  const auto gone = c.Post("/v2/models/m/infer", body, "application/json");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  const auto ready_only = admin_post(c, "/v2/repository/index", R"({"ready": true})");
  ASSERT_TRUE(ready_only);
  EXPECT_EQ(json::parse(ready_only->body), json::array());
  const auto unknown = admin_post(c, "/v2/repository/models/nosuch/load");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  const auto back = admin_post(c, "/v2/repository/models/m/load", pinned.dump());
  ASSERT_TRUE(back);
  ASSERT_EQ(back->status, 200) << back->body;
  const auto served = c.Post("/v2/models/m/infer", body, "application/json");
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200) << served->body;
}

TEST(ModelControl, ModeNoneListsButRefusesLoadAndUnload) {
  rt::daemon::EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  o.repositories = {kModels};
  o.models = rt::daemon::repository_models(o.repositories, {"karate-gcn"}).models;
  o.model_control = false;
  rt::daemon::EngineService service(o);
  const json index = service.repository_index();
  ASSERT_EQ(index.size(), 3u);
  EXPECT_EQ(index[0]["state"], "READY");        // karate-gcn
  EXPECT_EQ(index[1]["state"], "UNAVAILABLE");  // karate-gin, karate-sage: not loaded at start
  EXPECT_EQ(index[2]["state"], "UNAVAILABLE");
  try {
    service.load_model("karate-gin");
    ADD_FAILURE() << "load accepted in model control mode none";
  } catch (const rt::daemon::NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("--model-control-mode none"), std::string::npos) << e.what();
  }
  EXPECT_THROW(service.unload_model("karate-gcn"), rt::daemon::NotSupported);
}

// --model-control-mode poll: the service follows the repository's folders.
TEST_F(ModelReload, PollFollowsTheRepository) {
  EXPECT_TRUE(service_->poll_repository().empty());  // nothing changed since start
  write_version(repo_, 2, 3.0f);
  auto changes = service_->poll_repository();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], "model 'm' reloaded, version 2");
  EXPECT_EQ(service_->model("m").version, 2);
  // A broken new version is reported once and not retried while the folder stays the same.
  write_version(repo_, 3, std::nanf(""));
  changes = service_->poll_repository();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("model 'm' not reloaded:"), std::string::npos) << changes[0];
  EXPECT_NE(changes[0].find("NaN"), std::string::npos) << changes[0];
  EXPECT_TRUE(service_->poll_repository().empty());
  EXPECT_EQ(service_->model("m").version, 2);  // still serving
  // A new model folder is loaded; a removed one unloaded.
  fs::copy(kModels + "/karate-gin", repo_ / "gin", fs::copy_options::recursive);
  changes = service_->poll_repository();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], "model 'gin' loaded, version 1");
  fs::remove_all(repo_ / "gin");
  changes = service_->poll_repository();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], "model 'gin' unloaded: its folder is gone");
  EXPECT_THROW(service_->model("gin"), rt::daemon::NotFound);
}

// dype-client repository index | load | unload against the same server.
TEST_F(ModelReload, ClientRepositoryCommands) {
  const fs::path token = repo_.parent_path() / "client-token";
  std::ofstream(token) << kToken << "\n";
  const std::string exe = std::string(DYPE_BINARY_DIR) + "/apps/dype-client";
  const std::string base = "--http-port " + std::to_string(http_->http_port()) + " repository --token-file " + token.string();
  const auto index = test::run_cli(exe, base + " index");
  ASSERT_EQ(index.status, 0) << index.out;
  EXPECT_NE(index.out.find("\"state\": \"READY\""), std::string::npos) << index.out;
  write_version(repo_, 2, 0.5f);
  const auto load = test::run_cli(exe, base + " load m");
  ASSERT_EQ(load.status, 0) << load.out;
  EXPECT_NE(load.out.find("\"version\": \"2\""), std::string::npos) << load.out;
  const fs::path cfg = repo_.parent_path() / "pin1.yaml";
  std::ofstream(cfg) << "family: gcn\nin_features: 34\nhidden: 16\nout_features: 2\nlayers: 2\nversion: 1\n";
  const auto pinned = test::run_cli(exe, base + " load m " + cfg.string());
  ASSERT_EQ(pinned.status, 0) << pinned.out;
  EXPECT_EQ(service_->model("m").version, 1);
  const auto unload = test::run_cli(exe, base + " unload m");
  ASSERT_EQ(unload.status, 0) << unload.out;
  const auto again = test::run_cli(exe, base + " unload m");
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.out.find("unknown model 'm'"), std::string::npos) << again.out;
}

TEST_F(ModelReload, GrpcRepositoryCalls) {
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_->port()), grpc::InsecureChannelCredentials()));
  auto call = [&](auto method, const auto& q, auto* r, bool token = true) {
    grpc::ClientContext ctx;
    if (token) ctx.AddMetadata("authorization", "Bearer " + kToken);
    return ((*stub).*method)(&ctx, q, r);
  };
  inference::RepositoryIndexRequest iq;
  inference::RepositoryIndexResponse ir;
  EXPECT_EQ(call(&inference::GRPCInferenceService::Stub::RepositoryIndex, iq, &ir, false).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::RepositoryIndex, iq, &ir).ok());
  ASSERT_EQ(ir.models_size(), 1);
  EXPECT_EQ(ir.models(0).name(), "m");
  EXPECT_EQ(ir.models(0).state(), "READY");

  write_version(repo_, 2, 2.0f);
  inference::RepositoryModelLoadRequest lq;
  lq.set_model_name("m");
  inference::RepositoryModelLoadResponse lr;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::RepositoryModelLoad, lq, &lr).ok());
  inference::ModelMetadataRequest mq;
  mq.set_name("m");
  inference::ModelMetadataResponse mr;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::ModelMetadata, mq, &mr).ok());
  ASSERT_EQ(mr.versions_size(), 1);
  EXPECT_EQ(mr.versions(0), "2");

  (*lq.mutable_parameters())["config"].set_string_param("family: gcn\nin_features: 34\nhidden: 16\nlayers: 2\nbogus: 1\n");
  const grpc::Status bad = call(&inference::GRPCInferenceService::Stub::RepositoryModelLoad, lq, &lr);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("bogus"), std::string::npos) << bad.error_message();

  inference::RepositoryModelUnloadRequest uq;
  uq.set_model_name("m");
  inference::RepositoryModelUnloadResponse ur;
  ASSERT_TRUE(call(&inference::GRPCInferenceService::Stub::RepositoryModelUnload, uq, &ur).ok());
  inference::ModelMetadataResponse gone;
  EXPECT_EQ(call(&inference::GRPCInferenceService::Stub::ModelMetadata, mq, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(call(&inference::GRPCInferenceService::Stub::RepositoryModelUnload, uq, &ur).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

}  // namespace
