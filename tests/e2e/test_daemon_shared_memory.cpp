// The KServe/Triton shared-memory extension on dype-serve's real HTTP and gRPC front ends: a
// client creates a POSIX shared-memory object, registers a region of it, names the region in
// input x and output y, and gets the in-process reference's answer in its region; every bad use
// (unknown region, offset past it, wrong size, another owner's region, a name twice, a key that is
// no shared-memory object, an object truncated after registering, the extension off) is a precise
// 4xx / gRPC code and the daemon goes on serving.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

#include <httplib.h>  // after Eigen: its <resolv.h> defines _res, a name Eigen uses

using namespace dype;
using namespace dype::rt::daemon;
using nlohmann::json;

namespace {

constexpr std::int64_t kNodes = 64, kEdges = 256, kIn = 8;

EngineServiceOptions small_gcn() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = kIn, .hidden = 16, .seed = 7};
  o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 500, .feature_len = kIn}}};
  return o;
}

// A POSIX shared-memory object of `bytes`, mapped here; unlinked and unmapped at the end.
struct ShmObject {
  std::string key;
  int fd = -1;
  char* data = nullptr;
  std::size_t bytes = 0;
  ShmObject(const std::string& name, std::size_t n) : key("/" + name + "-" + std::to_string(getpid())), bytes(n) {
    fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0) << key;
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(n)), 0);
    data = static_cast<char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(data, MAP_FAILED);
  }
  ~ShmObject() {
    munmap(data, bytes);
    close(fd);
    shm_unlink(key.c_str());
  }
};

class DaemonSharedMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = std::make_unique<EngineService>(small_gcn());
    http_ = start_http(true);
    grpc_ = std::make_unique<GrpcServer>(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
    grpc_->set_shared_memory(&http_->shared_memory());
    grpc_->start();
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_->port()), grpc::InsecureChannelCredentials()));
    const kernels::EdgeList el = rt::random_graph(kNodes, kEdges, 3);
    edge_index_ = el.src;
    edge_index_.insert(edge_index_.end(), el.dst.begin(), el.dst.end());
    x_.resize(kNodes * kIn);
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] = std::sin(0.37f * static_cast<float>(i));
    y_ref_ = rt::reference_forward(*service_->model("gcn").model,
                                   rt::Request::gnn(rt::Graph::from_edges(el, true), rt::make_tensor(kNodes, kIn, x_)));
  }
  void TearDown() override {
    grpc_->stop(1.0);
    http_->stop();
  }
  std::unique_ptr<HttpServer> start_http(bool allow) {
    ServerOptions o;
    o.http_port = 0;
    o.metrics_port = -1;
    o.allow_client_shm = allow;
    auto h = std::make_unique<HttpServer>(*service_, graphs_, metrics_, o);
    h->start();
    return h;
  }
  httplib::Result post(const std::string& path, const json& body, const std::string& owner = "") {
    httplib::Client c("127.0.0.1", http_->http_port());
    httplib::Headers h;
    if (!owner.empty()) h.emplace("Dype-Graph-Owner", owner);
    return c.Post(path, h, body.dump(), "application/json");
  }
  httplib::Result register_region(const std::string& name, const std::string& key, std::uint64_t offset,
                                  std::uint64_t size, const std::string& owner = "") {
    return post("/v2/systemsharedmemory/region/" + name + "/register",
                {{"key", key}, {"offset", offset}, {"byte_size", size}}, owner);
  }
  // x and y in regions "in" and "out" (y at `y_offset`), edge_index as JSON data.
  json infer_body(std::uint64_t x_bytes, std::uint64_t y_offset, std::uint64_t y_bytes) const {
    return {{"inputs",
             {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {kNodes, kIn}},
               {"parameters", {{"shared_memory_region", "in"}, {"shared_memory_byte_size", x_bytes}}}},
              {{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, kEdges}}, {"data", edge_index_}}}},
            {"outputs",
             {{{"name", "y"},
               {"parameters",
                {{"shared_memory_region", "out"}, {"shared_memory_offset", y_offset}, {"shared_memory_byte_size", y_bytes}}}}}}};
  }
  std::size_t y_bytes() const { return y_ref_.data.size() * sizeof(float); }
  void expect_y(const char* at) const {
    std::vector<float> y(y_ref_.data.size());
    std::memcpy(y.data(), at, y_bytes());
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], y_ref_.data[i], 1e-5) << i;
  }

  std::unique_ptr<EngineService> service_;
  GraphRegistry graphs_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::vector<std::int64_t> edge_index_;
  std::vector<float> x_;
  rt::HostTensor y_ref_;
};

}  // namespace

TEST_F(DaemonSharedMemory, HttpInputsAndOutputsThroughRegions) {
  ShmObject in("dype-test-in", x_.size() * 4), out("dype-test-out", 4096 + y_bytes());
  std::memcpy(in.data, x_.data(), in.bytes);
  ASSERT_EQ(register_region("in", in.key, 0, in.bytes)->status, 200);
  ASSERT_EQ(register_region("out", out.key, 0, out.bytes)->status, 200);
  auto st = httplib::Client("127.0.0.1", http_->http_port()).Get("/v2/systemsharedmemory/status");
  ASSERT_EQ(st->status, 200);
  const json regions = json::parse(st->body);
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0]["name"], "in");
  EXPECT_EQ(regions[0]["key"], in.key);
  EXPECT_EQ(regions[0]["byte_size"], in.bytes);

  auto r = post("/v2/models/gcn/infer", infer_body(in.bytes, 4096, y_bytes()));
  ASSERT_EQ(r->status, 200) << r->body;
  const json answer = json::parse(r->body);
  const json& y = answer["outputs"][0];
  EXPECT_FALSE(y.contains("data"));
  EXPECT_EQ(y["parameters"]["shared_memory_region"], "out");
  EXPECT_EQ(y["parameters"]["shared_memory_offset"], 4096);
  EXPECT_EQ(y["parameters"]["shared_memory_byte_size"], y_bytes());
  EXPECT_EQ(y["shape"], json({y_ref_.rows, y_ref_.cols}));
  expect_y(out.data + 4096);

  // Unregistered while nothing uses them; the status is empty again.
  ASSERT_EQ(post("/v2/systemsharedmemory/unregister", json::object())->status, 200);
  st = httplib::Client("127.0.0.1", http_->http_port()).Get("/v2/systemsharedmemory/status");
  EXPECT_EQ(json::parse(st->body).size(), 0u);
}

TEST_F(DaemonSharedMemory, GrpcRegisterInferAndStatus) {
  ShmObject in("dype-test-gin", x_.size() * 4), out("dype-test-gout", y_bytes());
  std::memcpy(in.data, x_.data(), in.bytes);
  for (auto [name, obj] : {std::pair{"in", &in}, std::pair{"out", &out}}) {
    grpc::ClientContext ctx;
    inference::SystemSharedMemoryRegisterRequest q;
    inference::SystemSharedMemoryRegisterResponse a;
    q.set_name(name);
    q.set_key(obj->key);
    q.set_byte_size(obj->bytes);
    ASSERT_TRUE(stub_->SystemSharedMemoryRegister(&ctx, q, &a).ok());
  }
  inference::ModelInferRequest q;
  q.set_model_name("gcn");
  auto* x = q.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(kNodes);
  x->add_shape(kIn);
  (*x->mutable_parameters())["shared_memory_region"].set_string_param("in");
  (*x->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<std::int64_t>(in.bytes));
  auto* e = q.add_inputs();
  e->set_name("edge_index");
  e->set_datatype("INT64");
  e->add_shape(2);
  e->add_shape(kEdges);
  q.add_raw_input_contents(std::string(reinterpret_cast<const char*>(edge_index_.data()), edge_index_.size() * 8));
  auto* o = q.add_outputs();
  o->set_name("y");
  (*o->mutable_parameters())["shared_memory_region"].set_string_param("out");
  (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<std::int64_t>(out.bytes));
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse a;
    const grpc::Status s = stub_->ModelInfer(&ctx, q, &a);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(a.outputs_size(), 1);
    EXPECT_EQ(a.outputs(0).parameters().at("shared_memory_region").string_param(), "out");
    EXPECT_TRUE(a.raw_output_contents(0).empty());
    expect_y(out.data);
  }
  std::memset(out.data, 0, out.bytes);
  {  // The same through ModelStreamInfer.
    grpc::ClientContext ctx;
    auto stream = stub_->ModelStreamInfer(&ctx);
    ASSERT_TRUE(stream->Write(q));
    inference::ModelStreamInferResponse a;
    ASSERT_TRUE(stream->Read(&a));
    EXPECT_EQ(a.error_message(), "");
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    expect_y(out.data);
  }
  grpc::ClientContext ctx;
  inference::SystemSharedMemoryStatusRequest sq;
  inference::SystemSharedMemoryStatusResponse sa;
  ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&ctx, sq, &sa).ok());
  ASSERT_EQ(sa.regions().size(), 2u);
  EXPECT_EQ(sa.regions().at("in").key(), in.key);
}

TEST_F(DaemonSharedMemory, BadUsesArePreciseAndTheDaemonKeepsServing) {
  ShmObject in("dype-test-bin", x_.size() * 4), out("dype-test-bout", y_bytes());
  std::memcpy(in.data, x_.data(), in.bytes);
  ASSERT_EQ(register_region("in", in.key, 0, in.bytes)->status, 200);
  ASSERT_EQ(register_region("out", out.key, 0, out.bytes)->status, 200);
  auto expect = [](const httplib::Result& r, int status, const std::string& words) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_NE(r->body.find(words), std::string::npos) << r->body;
  };
  // Registration.
  expect(register_region("in", in.key, 0, in.bytes), 409, "already registered");
  expect(register_region("nokey", "/dype-no-such-object", 0, 16), 400, "key");
  expect(register_region("slash", "/etc/passwd", 0, 16), 400, "not a shared-memory object name");
  expect(register_region("big", in.key, 8, in.bytes), 400, "runs past the end");
  expect(post("/v2/systemsharedmemory/region/x/register", {{"key", in.key}}), 400, "byte_size");
  // Use.
  json b = infer_body(in.bytes, 0, y_bytes());
  b["inputs"][0]["parameters"]["shared_memory_region"] = "nope";
  expect(post("/v2/models/gcn/infer", b), 404, "no region named 'nope'");
  b = infer_body(in.bytes - 4, 0, y_bytes());
  expect(post("/v2/models/gcn/infer", b), 400, "shared_memory_byte_size");
  b = infer_body(in.bytes, 8, y_bytes());  // 8 + y runs past "out"
  expect(post("/v2/models/gcn/infer", b), 400, "runs past region 'out'");
  b = infer_body(in.bytes, 0, y_bytes());
  b["inputs"][0]["data"] = json::array({1.0});
  expect(post("/v2/models/gcn/infer", b), 400, "has both data and parameters.shared_memory_region");
  b = infer_body(in.bytes, 0, y_bytes());
  b["inputs"][0]["parameters"].erase("shared_memory_byte_size");
  expect(post("/v2/models/gcn/infer", b), 400, "shared_memory_byte_size");
  expect(post("/v2/models/gcn/infer", infer_body(in.bytes, 0, y_bytes()), "someone-else"), 403,
         "belongs to another client");
  expect(post("/v2/systemsharedmemory/region/in/unregister", json::object(), "someone-else"), 403, "another client");
  // CUDA regions: a 64-byte handle in standard base64 ends in "==", as Triton's clients send it.
  // It reaches the CUDA runtime (no CUDA in this build: 501; no device: device_id), not a
  // base64 error; bad base64 is one.
  const std::string handle_b64 = std::string(84, 'A') + "AA==";
  auto cuda = post("/v2/cudasharedmemory/region/c/register",
                   {{"raw_handle", {{"b64", handle_b64}}}, {"device_id", 0}, {"byte_size", 64}});
  ASSERT_TRUE(cuda);
  EXPECT_TRUE(cuda->status == 501 || cuda->status == 400) << cuda->body;
  EXPECT_EQ(cuda->body.find("raw_handle"), std::string::npos) << cuda->body;
  for (const std::string bad : {"AAA$", "A===", "AAAAA", "AA=A"})
    expect(post("/v2/cudasharedmemory/region/c/register",
                {{"raw_handle", {{"b64", bad}}}, {"device_id", 0}, {"byte_size", 64}}),
           400, "raw_handle.b64");
  // Truncated by the client after registering: refused, no SIGBUS.
  ASSERT_EQ(ftruncate(in.fd, 16), 0);
  expect(post("/v2/models/gcn/infer", infer_body(in.bytes, 0, y_bytes())), 400, "truncated");
  ASSERT_EQ(ftruncate(in.fd, static_cast<off_t>(in.bytes)), 0);  // the zeros of the regrown tail
  std::memcpy(in.data, x_.data(), in.bytes);
  auto ok = post("/v2/models/gcn/infer", infer_body(in.bytes, 0, y_bytes()));
  EXPECT_EQ(ok->status, 200) << ok->body;
  expect_y(out.data);
  // Off: every call and every request naming shared memory is refused.
  auto off = start_http(false);
  httplib::Client c("127.0.0.1", off->http_port());
  expect(c.Get("/v2/systemsharedmemory/status"), 403, "--allow-client-shm");
  expect(c.Post("/v2/models/gcn/infer", infer_body(in.bytes, 0, y_bytes()).dump(), "application/json"), 403,
         "--allow-client-shm");
  off->stop();
  // gRPC codes as Triton's: a name twice is ALREADY_EXISTS; an unknown name unregisters nothing.
  grpc::ClientContext ctx;
  inference::SystemSharedMemoryRegisterRequest rq;
  inference::SystemSharedMemoryRegisterResponse ra;
  rq.set_name("in");
  rq.set_key(in.key);
  rq.set_byte_size(in.bytes);
  EXPECT_EQ(stub_->SystemSharedMemoryRegister(&ctx, rq, &ra).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  grpc::ClientContext ctx2;
  inference::SystemSharedMemoryUnregisterRequest uq;
  inference::SystemSharedMemoryUnregisterResponse ua;
  uq.set_name("never");
  EXPECT_TRUE(stub_->SystemSharedMemoryUnregister(&ctx2, uq, &ua).ok());
}
