// dype-serve's front ends over TLS (ServerOptions::tls, GrpcServer::set_tls) with the real engine:
// HTTPS graph registration and infer by graph id, and gRPC ModelInfer and ModelStreamInfer over
// TLS, each equal to the in-process reference; a gRPC client trusting another CA, or speaking plain
// text, is refused and the server goes on; plain HTTP sent to the HTTPS port is counted in
// dype_http_tls_handshake_failures_total on the metrics port, which stays plain HTTP.
// Certificates are made at test time with the openssl command line (skipped without it).
#include <cmath>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/daemon/http/tls.h"
#include "../test_raw_http.h"
#include "../test_tls_certs.h"

#include <httplib.h>

using namespace dype;
using namespace dype::rt::daemon;
using json = nlohmann::json;

namespace {

// cpp-httplib's TLS client writes through OpenSSL's socket BIO, which raises SIGPIPE when the server
// has closed the connection (a refused client): an error to see, not a signal that ends the test.
[[maybe_unused]] const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

EngineServiceOptions small_models() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 8, .hidden = 16, .seed = 7};
  o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 500, .feature_len = 8}}};
  return o;
}

struct Input {
  kernels::EdgeList edges;
  std::vector<float> x;
};

Input make_input(std::int64_t n, std::int64_t e, std::uint64_t seed) {
  Input in{rt::random_graph(n, e, seed), std::vector<float>(static_cast<std::size_t>(n * 8))};
  for (std::size_t i = 0; i < in.x.size(); ++i) in.x[i] = std::cos(static_cast<float>(i + seed));
  return in;
}

std::vector<std::int64_t> edge_index(const kernels::EdgeList& el) {
  std::vector<std::int64_t> ei = el.src;
  ei.insert(ei.end(), el.dst.begin(), el.dst.end());
  return ei;
}

void expect_close(const std::vector<float>& got, const rt::HostTensor& want) {
  ASSERT_EQ(got.size(), want.data.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want.data[i], 1e-4f * (1.0f + std::abs(want.data[i]))) << "element " << i;
}

class DaemonTls : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pki_.ok) GTEST_SKIP() << pki_.why;
    service_ = std::make_unique<EngineService>(small_models());
    ServerOptions options;
    options.http_port = 0;
    options.metrics_port = 0;
    options.tls = load_tls_identity(pki_.server_cert.string(), pki_.server_key.string());
    http_ = std::make_unique<HttpServer>(*service_, graphs_, metrics_, options);
    http_->start();
    grpc_ = std::make_unique<GrpcServer>(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
    grpc_->set_tls(*options.tls);
    grpc_->start();
  }
  void TearDown() override {
    if (grpc_) grpc_->stop(1.0);
    if (http_) http_->stop();
  }
  std::unique_ptr<httplib::SSLClient> https() const {
    auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", http_->http_port());
    c->set_ca_cert_path(pki_.ca.string());
    c->enable_server_certificate_verification(true);
    c->set_read_timeout(30, 0);
    return c;
  }
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_->port()), std::move(credentials)));
  }
  std::shared_ptr<grpc::ChannelCredentials> trusting(const std::filesystem::path& ca) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = load_ca_certificates(ca.string(), "ca");
    return grpc::SslCredentials(ssl);
  }
  rt::HostTensor reference(const Input& in) {
    return rt::reference_forward(*service_->model("gcn").model,
                                 rt::Request::gnn(rt::Graph::from_edges(in.edges, true),
                                                  rt::make_tensor(in.edges.num_nodes, 8, in.x)));
  }
  static inference::ModelInferRequest to_request(const Input& in) {
    inference::ModelInferRequest r;
    r.set_model_name("gcn");
    auto* x = r.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(in.edges.num_nodes);
    x->add_shape(8);
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(in.x.data()), in.x.size() * 4));
    const std::vector<std::int64_t> ei = edge_index(in.edges);
    auto* e = r.add_inputs();
    e->set_name("edge_index");
    e->set_datatype("INT64");
    e->add_shape(2);
    e->add_shape(in.edges.num_edges());
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(ei.data()), ei.size() * 8));
    return r;
  }
  static std::vector<float> output_of(const inference::ModelInferResponse& r) {
    std::vector<float> v(r.raw_output_contents(0).size() / 4);
    std::memcpy(v.data(), r.raw_output_contents(0).data(), v.size() * 4);
    return v;
  }

  const dype::test::TestPki& pki_ = dype::test::make_test_pki();
  std::unique_ptr<EngineService> service_;
  GraphRegistry graphs_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
};

TEST_F(DaemonTls, HttpsInferOnARegisteredGraphMatchesTheReference) {
  const Input in = make_input(120, 600, 3);
  auto c = https();
  const EncodedBody g = encode_infer_request(
      "", {Tensor::from_i64("edge_index", {2, in.edges.num_edges()}, edge_index(in.edges))},
      json{{"num_nodes", in.edges.num_nodes}}, true, false);
  auto reg = c->Post("/v2/dype/graphs", {{"Inference-Header-Content-Length", std::to_string(*g.header_length)}}, g.body,
                     "application/octet-stream");
  ASSERT_TRUE(reg) << httplib::to_string(reg.error());
  ASSERT_EQ(reg->status, 200) << reg->body;
  const std::string id = json::parse(reg->body).at("id");
  for (int i = 0; i < 3; ++i) {  // one keep-alive connection
    const EncodedBody b = encode_infer_request("", {Tensor::from_f32("x", {in.edges.num_nodes, 8}, in.x)},
                                               json{{"graph_id", id}}, true, true);
    auto r = c->Post("/v2/models/gcn/infer", {{"Inference-Header-Content-Length", std::to_string(*b.header_length)}},
                     b.body, "application/octet-stream");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    std::optional<std::size_t> hl;
    if (r->has_header("Inference-Header-Content-Length"))
      hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
    const InferResponse out = parse_infer_response(r->body, hl);
    ASSERT_EQ(out.outputs.size(), 1u);
    expect_close(out.outputs[0].f32(), reference(in));
  }
}

TEST_F(DaemonTls, GrpcOverTlsInferAndStreamMatchTheReference) {
  const Input in = make_input(90, 400, 5);
  auto s = stub(trusting(pki_.ca));
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse r;
    const grpc::Status st = s->ModelInfer(&ctx, to_request(in), &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
    expect_close(output_of(r), reference(in));
  }
  grpc::ClientContext ctx;
  auto stream = s->ModelStreamInfer(&ctx);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(stream->Write(to_request(in)));
    inference::ModelStreamInferResponse r;
    ASSERT_TRUE(stream->Read(&r));
    ASSERT_EQ(r.error_message(), "");
    expect_close(output_of(r.infer_response()), reference(in));
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(DaemonTls, GrpcClientTrustingAnotherCaOrSpeakingPlainTextIsRefused) {
  const Input in = make_input(50, 200, 1);
  for (auto credentials : {trusting(pki_.other_ca), grpc::InsecureChannelCredentials()}) {
    auto s = stub(credentials);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    inference::ModelInferResponse r;
    const grpc::Status st = s->ModelInfer(&ctx, to_request(in), &r);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  }
  grpc::ClientContext ctx;
  inference::ModelInferResponse r;
  ASSERT_TRUE(stub(trusting(pki_.ca))->ModelInfer(&ctx, to_request(in), &r).ok());
  expect_close(output_of(r), reference(in));
}

TEST_F(DaemonTls, PlainHttpToTheHttpsPortIsCountedOnThePlainMetricsPort) {
  {
    dype::test::RawConnection plain(http_->http_port(), 5);
    plain.send_all("GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(plain.closed_by_server());
  }
  auto ready = https()->Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
  httplib::Client metrics("127.0.0.1", http_->metrics_port());
  auto m = metrics.Get("/metrics");
  ASSERT_TRUE(m) << httplib::to_string(m.error());
  EXPECT_NE(m->body.find("dype_http_tls_handshake_failures_total 1\n"), std::string::npos) << m->body;
}

}  // namespace
