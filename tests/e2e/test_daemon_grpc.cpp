// dype-serve's gRPC front end (inference.GRPCInferenceService) over a real loopback socket:
// unary infer equals the in-process reference, errors map to gRPC codes, and Triton's
// ModelStreamInfer answers every request exactly once, in order, bad ones with error_message,
// also while dype.admin.DypeAdmin drains a GPU and swaps an FPGA's bitstream mid-stream.
// The same service on a Unix-domain socket (--grpc-socket).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/proto/dype_admin.grpc.pb.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "runtime/daemon/proto/health.grpc.pb.h"
#include "../test_replan_counts.h"

using namespace dype;
using namespace dype::rt::daemon;

namespace {

EngineServiceOptions small_models() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 8, .hidden = 16, .seed = 7};
  o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 500, .feature_len = 8}}};
  return o;
}

struct Input {
  std::int64_t n;
  std::vector<std::int64_t> edge_index;
  std::vector<float> x;
};

Input make_input(std::int64_t n, std::int64_t e, std::uint64_t seed) {
  const kernels::EdgeList el = rt::random_graph(n, e, seed);
  Input in{n, el.src, std::vector<float>(static_cast<std::size_t>(n * 8))};
  in.edge_index.insert(in.edge_index.end(), el.dst.begin(), el.dst.end());
  for (std::size_t i = 0; i < in.x.size(); ++i) in.x[i] = std::cos(static_cast<float>(i + seed));
  return in;
}

inference::ModelInferRequest to_request(const Input& in, const std::string& id) {
  inference::ModelInferRequest r;
  r.set_model_name("gcn");
  r.set_id(id);
  auto* x = r.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(in.n);
  x->add_shape(8);
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(in.x.data()), in.x.size() * 4));
  auto* e = r.add_inputs();
  e->set_name("edge_index");
  e->set_datatype("INT64");
  e->add_shape(2);
  e->add_shape(static_cast<std::int64_t>(in.edge_index.size() / 2));
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(in.edge_index.data()), in.edge_index.size() * 8));
  return r;
}

rt::HostTensor output_of(const inference::ModelInferResponse& r) {
  const auto& o = r.outputs(0);
  std::vector<float> v(r.raw_output_contents(0).size() / 4);
  std::memcpy(v.data(), r.raw_output_contents(0).data(), v.size() * 4);
  return rt::make_tensor(o.shape(0), o.shape(1), v);
}

class DaemonGrpc : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = std::make_unique<EngineService>(small_models());
    ServerOptions options;
    options.http_port = 0;
    options.metrics_port = -1;
    http_ = std::make_unique<HttpServer>(*service_, graphs_, metrics_, options);
    http_->start();
    admin_ = std::make_unique<AdminApi>(*service_, admin_hooks(*service_), "s3cret",
                                        std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams");
    grpc_ = std::make_unique<GrpcServer>(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0,
                                         256u << 20, admin_.get());
    grpc_->start();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_->port()), grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel);
    admin_stub_ = dype::admin::DypeAdmin::NewStub(channel);
  }
  void TearDown() override {
    grpc_->stop(1.0);
    http_->stop();
  }
  rt::HostTensor reference(const Input& in) {
    kernels::EdgeList el;
    el.num_nodes = in.n;
    const auto e = static_cast<std::ptrdiff_t>(in.edge_index.size() / 2);
    el.src.assign(in.edge_index.begin(), in.edge_index.begin() + e);
    el.dst.assign(in.edge_index.begin() + e, in.edge_index.end());
    return rt::reference_forward(*service_->model("gcn").model,
                                 rt::Request::gnn(rt::Graph::from_edges(el, true), rt::make_tensor(in.n, 8, in.x)));
  }

  std::unique_ptr<EngineService> service_;
  GraphRegistry graphs_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<AdminApi> admin_;
  std::unique_ptr<GrpcServer> grpc_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<dype::admin::DypeAdmin::Stub> admin_stub_;
};

}  // namespace

TEST_F(DaemonGrpc, HealthMetadataAndUnaryInfer) {
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse r;
    ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest q;
    q.set_name("gcn");
    inference::ModelMetadataResponse r;
    ASSERT_TRUE(stub_->ModelMetadata(&ctx, q, &r).ok());
    EXPECT_EQ(r.inputs(0).name(), "x");
    EXPECT_EQ(r.inputs(0).shape(1), 8);
  }
  const Input in = make_input(60, 240, 3);
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status st = stub_->ModelInfer(&ctx, to_request(in, "u1"), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.id(), "u1");
  EXPECT_LT(rt::relative_error(output_of(resp), reference(in)), 1e-5);
}

// grpc.health.v1.Health, as Kubernetes' gRPC probes ask it: SERVING for the server and for the
// inference service while serving, NOT_SERVING once shutdown begins, SERVICE_UNKNOWN for others.
TEST_F(DaemonGrpc, StandardHealthCheck) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_->port()), grpc::InsecureChannelCredentials()));
  auto check = [&](const std::string& service, grpc::Status* st = nullptr) {
    grpc::health::v1::HealthCheckRequest q;
    q.set_service(service);
    grpc::health::v1::HealthCheckResponse r;
    grpc::ClientContext ctx;
    const grpc::Status s = health->Check(&ctx, q, &r);
    if (st) *st = s;
    return r.status();
  };
  using R = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(check(""), R::SERVING);
  EXPECT_EQ(check("inference.GRPCInferenceService"), R::SERVING);
  grpc::Status unknown;
  check("no.such.Service", &unknown);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  grpc_->set_serving(false);
  EXPECT_EQ(check(""), R::NOT_SERVING);
  EXPECT_EQ(check("inference.GRPCInferenceService"), R::NOT_SERVING);
}

TEST_F(DaemonGrpc, ErrorsMapToCodes) {
  Input in = make_input(20, 40, 4);
  in.edge_index[5] = 20;  // out of range
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status st = stub_->ModelInfer(&ctx, to_request(in, "bad"), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("out of range"), std::string::npos) << st.error_message();
  auto req = to_request(make_input(20, 40, 4), "x");
  req.set_model_name("nope");
  grpc::ClientContext ctx2;
  EXPECT_EQ(stub_->ModelInfer(&ctx2, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  auto short_raw = to_request(make_input(20, 40, 4), "s");
  short_raw.mutable_raw_input_contents(0)->resize(12);
  grpc::ClientContext ctx3;
  EXPECT_EQ(stub_->ModelInfer(&ctx3, short_raw, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Hostile input over gRPC: a NUL inside a bitstream path is refused naming the field (the file
// system would see only the part before it), and a model name that is not served is counted under
// model="unknown" in the metrics; good calls are answered afterwards.
TEST_F(DaemonGrpc, NulInBitstreamPathAndUnknownModelNames) {
  auto load = [&](const std::string& path) {
    grpc::ClientContext c;
    c.AddMetadata("authorization", "Bearer s3cret");
    dype::admin::AdminRequest q;
    q.set_device("fpga0");
    q.set_path(path);
    dype::admin::AdminResponse r;
    return admin_stub_->LoadBitstream(&c, q, &r);
  };
  const grpc::Status nul = load(std::string("u280-sextans-gemm.yaml\0x", 24));
  EXPECT_EQ(nul.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(nul.error_message(), "path: contains a NUL byte");
  const grpc::Status ok = load("u280-sextans-gemm.yaml");
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  auto req = to_request(make_input(20, 40, 4), "x");
  req.set_model_name("x\"} 1\ndype_injected{model=\"x");
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  EXPECT_EQ(stub_->ModelInfer(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(metrics_.count("unknown", "not_found"), 1u);
  EXPECT_EQ(metrics_.render("").find("dype_injected"), std::string::npos);
  grpc::ClientContext ctx2;
  const grpc::Status good = stub_->ModelInfer(&ctx2, to_request(make_input(20, 40, 4), "g"), &resp);
  EXPECT_TRUE(good.ok()) << good.error_message();
}

TEST_F(DaemonGrpc, StreamAnswersEveryRequestOnceInOrder) {
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  constexpr int kRequests = 24;
  std::vector<Input> inputs;
  for (int i = 0; i < kRequests; ++i) inputs.push_back(make_input(40 + i, 160, 100 + static_cast<std::uint64_t>(i)));
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      Input in = inputs[static_cast<std::size_t>(i)];
      if (i == 7) in.x[3] = NAN;  // one bad request mid-stream
      stream->Write(to_request(in, "s" + std::to_string(i)));
    }
    stream->WritesDone();
  });
  inference::ModelStreamInferResponse r;
  int got = 0;
  while (stream->Read(&r)) {
    EXPECT_EQ(r.infer_response().id(), "s" + std::to_string(got));
    if (got == 7) {
      EXPECT_NE(r.error_message().find("NaN"), std::string::npos) << r.error_message();
    } else {
      EXPECT_TRUE(r.error_message().empty()) << r.error_message();
      EXPECT_LT(rt::relative_error(output_of(r.infer_response()), reference(inputs[static_cast<std::size_t>(got)])), 1e-5);
    }
    ++got;
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(got, kRequests);
}

// One ModelStreamInfer stream while an operator, over DypeAdmin, drains gpu0 (re-plan without it),
// loads another bitstream on fpga0 and undrains gpu0: every request is answered once, in order,
// equal to the in-process reference, and the engine records the swaps with their causes.
TEST_F(DaemonGrpc, StreamSurvivesReplanAndBitstreamSwapMidStream) {
  const dype::test::ReplanCounts counts0 = service_->engine("gcn").replan_counts();
  constexpr int kRequests = 60;
  std::vector<Input> inputs;
  for (int i = 0; i < kRequests; ++i)
    inputs.push_back(i < kRequests / 2 ? make_input(60, 240, 500 + static_cast<std::uint64_t>(i))
                                       : make_input(400, 6000, 500 + static_cast<std::uint64_t>(i)));
  auto admin = [&](auto rpc, const std::string& device, const std::string& path = "") {
    grpc::ClientContext c;
    c.AddMetadata("authorization", "Bearer s3cret");
    dype::admin::AdminRequest q;
    q.set_device(device);
    q.set_path(path);
    dype::admin::AdminResponse r;
    const grpc::Status st = ((*admin_stub_).*rpc)(&c, q, &r);
    EXPECT_TRUE(st.ok()) << device << " " << path << ": " << st.error_message();
  };
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < kRequests; ++i) {
      stream->Write(to_request(inputs[static_cast<std::size_t>(i)], "m" + std::to_string(i)));
      ++written;
      // A little pacing so the admin calls land while requests are still flowing.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    stream->WritesDone();
  });
  std::thread operator_thread([&] {
    auto when = [&](int n) {
      while (written.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    using Stub = dype::admin::DypeAdmin::Stub;
    when(10);
    admin(&Stub::DrainDevice, "gpu0");
    when(25);
    admin(&Stub::LoadBitstream, "fpga0", "u280-sextans-gemm.yaml");
    when(40);
    admin(&Stub::UndrainDevice, "gpu0");
  });
  inference::ModelStreamInferResponse r;
  int got = 0;
  while (stream->Read(&r)) {
    EXPECT_EQ(r.infer_response().id(), "m" + std::to_string(got));
    EXPECT_TRUE(r.error_message().empty()) << got << ": " << r.error_message();
    if (r.error_message().empty()) {
      EXPECT_LT(rt::relative_error(output_of(r.infer_response()), reference(inputs[static_cast<std::size_t>(got)])), 1e-5)
          << got;
    }
    ++got;
  }
  writer.join();
  operator_thread.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(got, kRequests);
  const dype::test::ReplanCounts counts = service_->engine("gcn").replan_counts();
  const auto swaps = [&](const char* cause) { return dype::test::swaps_since(counts0, counts, cause); };
  EXPECT_GE(swaps("drain"), 1u);  // the plan left gpu0 mid-stream
  EXPECT_GE(swaps("bitstream") + swaps("undrain"), 1u);
}

// Image choice over gRPC (dype.admin.DypeAdmin/ChooseImages): the proposal as JSON, the same
// document as the HTTP route; bad input is refused naming the field.
TEST_F(DaemonGrpc, ChooseImagesProposesOverGrpc) {
  auto choose = [&](const std::string& model, double horizon, dype::admin::AdminResponse* r) {
    grpc::ClientContext c;
    c.AddMetadata("authorization", "Bearer s3cret");
    dype::admin::AdminRequest q;
    q.set_model(model);
    q.set_horizon(horizon);
    return admin_stub_->ChooseImages(&c, q, r);
  };
  dype::admin::AdminResponse r;
  const grpc::Status ok = choose("gcn", 0, &r);  // 0: the default horizon
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  const nlohmann::json j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j["model"], "gcn");
  EXPECT_EQ(j["horizon"], 1000.0);
  EXPECT_FALSE(j["applied"].get<bool>());
  EXPECT_EQ(j["source"], "modelled");
  EXPECT_TRUE(j["predicted"].contains("plan")) << j.dump();
  EXPECT_EQ(choose("nope", 0, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  const grpc::Status bad = choose("gcn", -5, &r);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("horizon"), std::string::npos) << bad.error_message();
}

// dype-serve --infer-token-file: ModelInfer and ModelStreamInfer need "authorization: Bearer
// <token>" metadata (UNAUTHENTICATED, with the reason, otherwise); metadata and health stay open.
TEST_F(DaemonGrpc, InferenceTokenIsRequiredWhenSet) {
  GrpcServer guarded(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
  guarded.set_infer_token("t0ken");
  guarded.start();
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(guarded.port()), grpc::InsecureChannelCredentials()));
  const Input in = make_input(30, 90, 4);
  for (const char* auth : {"", "Bearer wrong", "t0ken"}) {
    grpc::ClientContext ctx;
    if (*auth) ctx.AddMetadata("authorization", auth);
    inference::ModelInferResponse resp;
    const grpc::Status st = stub->ModelInfer(&ctx, to_request(in, "x"), &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth;
    EXPECT_EQ(st.error_message(), "missing or wrong inference token (Authorization: Bearer <token>)");
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t0ken");
    inference::ModelInferResponse resp;
    const grpc::Status st = stub->ModelInfer(&ctx, to_request(in, "ok"), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_LT(rt::relative_error(output_of(resp), reference(in)), 1e-5);
  }
  {  // a stream without the token ends at once, unauthenticated
    grpc::ClientContext ctx;
    auto stream = stub->ModelStreamInfer(&ctx);
    stream->Write(to_request(in, "s1"));
    inference::ModelStreamInferResponse r;
    EXPECT_FALSE(stream->Read(&r));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {  // with it, answered
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t0ken");
    auto stream = stub->ModelStreamInfer(&ctx);
    ASSERT_TRUE(stream->Write(to_request(in, "s2")));
    inference::ModelStreamInferResponse r;
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_TRUE(r.error_message().empty()) << r.error_message();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest q;
    q.set_name("gcn");
    inference::ModelMetadataResponse r;
    EXPECT_TRUE(stub->ModelMetadata(&ctx, q, &r).ok());
  }
  guarded.stop(1.0);
}

// parameters.timeout over a stream: a bad value is answered in the stream naming it, and the
// stream goes on; a generous one is answered as usual.
TEST_F(DaemonGrpc, StreamRequestTimeoutIsChecked) {
  const Input in = make_input(30, 90, 5);
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  inference::ModelInferRequest bad = to_request(in, "bad");
  (*bad.mutable_parameters())["timeout"].set_int64_param(-1);
  inference::ModelInferRequest good = to_request(in, "good");
  (*good.mutable_parameters())["timeout"].set_int64_param(30000000);
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Write(good));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_NE(r.error_message().find("parameters.timeout"), std::string::npos) << r.error_message();
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_TRUE(r.error_message().empty()) << r.error_message();
  EXPECT_EQ(r.infer_response().id(), "good");
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// --grpc-socket: the same service on a Unix-domain socket, alone (port -1): unary and stream infer
// equal the reference; a stale socket file is replaced, a regular file at the path is refused with
// an error naming it (and left alone), and the socket file is gone after stop.
TEST_F(DaemonGrpc, UnixDomainSocketServesTheSameService) {
  char dir_template[] = "/tmp/dype-grpc-uds-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template, path = dir + "/grpc.sock";
  for (int round = 0; round < 2;
       ++round) {  // the second over the first's socket file, left as if crashed
    GrpcServer uds(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", -1);
    uds.set_unix_socket(path);
    uds.start();
    auto channel = grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    const Input in = make_input(50, 200, 5 + static_cast<std::uint64_t>(round));
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    const grpc::Status st = stub->ModelInfer(&ctx, to_request(in, "uds"), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_LT(rt::relative_error(output_of(resp), reference(in)), 1e-5);
    grpc::ClientContext sctx;
    auto s = stub->ModelStreamInfer(&sctx);
    ASSERT_TRUE(s->Write(to_request(in, "uds-stream")));
    inference::ModelStreamInferResponse sr;
    ASSERT_TRUE(s->Read(&sr));
    EXPECT_EQ(sr.error_message(), "");
    EXPECT_LT(rt::relative_error(output_of(sr.infer_response()), reference(in)), 1e-5);
    s->WritesDone();
    EXPECT_TRUE(s->Finish().ok());
    if (round == 0) {
      // A crash leaves the socket file: copy it aside, stop, and put a socket back where it was.
      ASSERT_EQ(::link(path.c_str(), (dir + "/stale.sock").c_str()), 0);
    }
    uds.stop(1.0);
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "removed on stop";
    if (round == 0) {
      ASSERT_EQ(::rename((dir + "/stale.sock").c_str(), path.c_str()), 0);
    }
  }
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a socket", f);
    std::fclose(f);
    GrpcServer uds(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", -1);
    uds.set_unix_socket(path);
    try {
      uds.start();
      ADD_FAILURE() << "started over a regular file";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_EQ(::access(path.c_str(), F_OK), 0) << "the file is left alone";
  }
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
}
