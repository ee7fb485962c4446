// dype-serve's gRPC streams on a bounded executor: ModelStreamInfer streams are callback reactors,
// so an idle stream holds no thread. 1,000 idle streams keep the process under 100 threads while a
// request on another channel is answered; streams beyond --grpc-max-streams are refused with
// RESOURCE_EXHAUSTED; a client that cancels a stream with work queued does not disturb the server;
// stop() with idle streams open returns promptly; a stream keeps reading while the thread that
// submitted its last request waits for that request's answer (dynamic batching).
// Bytes that are not a ModelInferRequest get an error answer and the stream reads on.
#include <dirent.h>

#include <chrono>
#include <cmath>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <gtest/gtest.h>

#include "runtime/daemon/batching_service.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

using namespace dype;
using namespace dype::rt::daemon;
using Clock = std::chrono::steady_clock;

namespace {

// Threads of this process (entries of /proc/self/task).
int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

EngineServiceOptions small_models() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 8, .hidden = 16, .seed = 7};
  o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 500, .feature_len = 8}}};
  return o;
}

inference::ModelInferRequest request(std::int64_t n, std::int64_t e, const std::string& id) {
  const kernels::EdgeList el = rt::random_graph(n, e, 11);
  std::vector<std::int64_t> ei = el.src;
  ei.insert(ei.end(), el.dst.begin(), el.dst.end());
  std::vector<float> x(static_cast<std::size_t>(n * 8));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  inference::ModelInferRequest r;
  r.set_model_name("gcn");
  r.set_id(id);
  auto* xi = r.add_inputs();
  xi->set_name("x");
  xi->set_datatype("FP32");
  xi->add_shape(n);
  xi->add_shape(8);
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  auto* ein = r.add_inputs();
  ein->set_name("edge_index");
  ein->set_datatype("INT64");
  ein->add_shape(2);
  ein->add_shape(e);
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(ei.data()), ei.size() * 8));
  return r;
}

std::shared_ptr<grpc::Channel> channel_to(int port, int tag) {
  grpc::ChannelArguments args;
  args.SetInt("dype.test.channel", tag);  // a channel (connection) of its own
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
}

class DaemonGrpcStreams : public ::testing::Test {
 protected:
  void SetUp() override { start(4096); }
  void start(std::size_t max_streams) {
    service_ = std::make_unique<EngineService>(small_models());
    ServerOptions options;
    options.http_port = 0;
    options.metrics_port = -1;
    http_ = std::make_unique<HttpServer>(*service_, graphs_, metrics_, options);
    http_->start();
    grpc_ = std::make_unique<GrpcServer>(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
    grpc_->set_max_streams(max_streams);
    grpc_->start();
  }
  void TearDown() override {
    if (grpc_) grpc_->stop(1.0);
    if (http_) http_->stop();
  }
  // Waits until the server holds `n` streams (false after 60 s).
  bool wait_streams(std::size_t n) {
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (grpc_->streams_open() != n) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  std::unique_ptr<EngineService> service_;
  GraphRegistry graphs_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
};

struct OpenStream {
  std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<grpc::ClientReaderWriter<inference::ModelInferRequest, inference::ModelStreamInferResponse>> rw;
};

}  // namespace

TEST_F(DaemonGrpcStreams, ThousandIdleStreamsHoldNoThreads) {
  constexpr int kStreams = 1000;
  const int threads0 = thread_count();
  auto idle_channel = channel_to(grpc_->port(), 1);
  auto stub = inference::GRPCInferenceService::NewStub(idle_channel);
  std::vector<OpenStream> streams(kStreams);
  for (OpenStream& s : streams) s.rw = stub->ModelStreamInfer(s.ctx.get());
  ASSERT_TRUE(wait_streams(kStreams)) << grpc_->streams_open() << " streams open";
  const int threads = thread_count();
  std::printf("threads: %d before, %d with %d idle streams open\n", threads0, threads, kStreams);
  EXPECT_LT(threads, 100);

  // A request on another channel is answered meanwhile, over unary and over a stream.
  auto other = inference::GRPCInferenceService::NewStub(channel_to(grpc_->port(), 2));
  {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    const grpc::Status st = other->ModelInfer(&ctx, request(40, 160, "u"), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.id(), "u");
  }
  {
    grpc::ClientContext ctx;
    auto s = other->ModelStreamInfer(&ctx);
    ASSERT_TRUE(s->Write(request(40, 160, "s")));
    inference::ModelStreamInferResponse r;
    ASSERT_TRUE(s->Read(&r));
    EXPECT_TRUE(r.error_message().empty()) << r.error_message();
    EXPECT_EQ(r.infer_response().id(), "s");
    s->WritesDone();
    EXPECT_TRUE(s->Finish().ok());
  }
  EXPECT_LT(thread_count(), 100);

  // The idle streams end cleanly when their clients close them.
  for (OpenStream& s : streams) s.rw->WritesDone();
  for (OpenStream& s : streams) EXPECT_TRUE(s.rw->Finish().ok());
  EXPECT_TRUE(wait_streams(0)) << grpc_->streams_open() << " streams still open";
}

// stop() with idle streams open: they are ended (UNAVAILABLE) without waiting out the deadline.
TEST_F(DaemonGrpcStreams, StopWithIdleStreamsIsPrompt) {
  auto stub = inference::GRPCInferenceService::NewStub(channel_to(grpc_->port(), 3));
  std::vector<OpenStream> streams(50);
  for (OpenStream& s : streams) s.rw = stub->ModelStreamInfer(s.ctx.get());
  ASSERT_TRUE(wait_streams(streams.size()));
  const auto t0 = Clock::now();
  grpc_->stop(30.0);
  const double stop_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(stop_s, 10.0);  // well before the 30 s deadline (0.05 s here; seconds under TSan)
  for (OpenStream& s : streams) {
    inference::ModelStreamInferResponse r;
    EXPECT_FALSE(s.rw->Read(&r));
    EXPECT_EQ(s.rw->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
}

// --grpc-max-streams: a stream beyond the cap is refused with RESOURCE_EXHAUSTED naming the limit;
// once one closes, a new one is served.
TEST_F(DaemonGrpcStreams, StreamsBeyondTheCapAreRefused) {
  TearDown();
  start(3);
  auto stub = inference::GRPCInferenceService::NewStub(channel_to(grpc_->port(), 4));
  std::vector<OpenStream> streams(3);
  for (OpenStream& s : streams) s.rw = stub->ModelStreamInfer(s.ctx.get());
  ASSERT_TRUE(wait_streams(3));
  {
    OpenStream extra;
    extra.rw = stub->ModelStreamInfer(extra.ctx.get());
    extra.rw->Write(request(20, 40, "x"));
    inference::ModelStreamInferResponse r;
    EXPECT_FALSE(extra.rw->Read(&r));
    const grpc::Status st = extra.rw->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(st.error_message().find("--grpc-max-streams"), std::string::npos) << st.error_message();
  }
  streams[0].rw->WritesDone();
  EXPECT_TRUE(streams[0].rw->Finish().ok());
  ASSERT_TRUE(wait_streams(2));
  OpenStream again;
  again.rw = stub->ModelStreamInfer(again.ctx.get());
  ASSERT_TRUE(again.rw->Write(request(20, 40, "y")));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(again.rw->Read(&r));
  EXPECT_TRUE(r.error_message().empty()) << r.error_message();
  again.rw->WritesDone();
  EXPECT_TRUE(again.rw->Finish().ok());
  for (std::size_t i = 1; i < streams.size(); ++i) {
    streams[i].rw->WritesDone();
    EXPECT_TRUE(streams[i].rw->Finish().ok());
  }
}

// A client that cancels a stream with requests still queued: the server drops the queued work,
// releases their admission tickets and keeps serving.
TEST_F(DaemonGrpcStreams, CancelledStreamDropsQueuedWork) {
  auto stub = inference::GRPCInferenceService::NewStub(channel_to(grpc_->port(), 5));
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext ctx;
    auto s = stub->ModelStreamInfer(&ctx);
    for (int i = 0; i < 30; ++i)
      if (!s->Write(request(800, 8000, "c" + std::to_string(i)))) break;
    ctx.TryCancel();
    EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ASSERT_TRUE(wait_streams(0)) << grpc_->streams_open() << " streams still open";
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (http_->admission().in_flight() != 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(http_->admission().in_flight(), 0u);
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status st = stub->ModelInfer(&ctx, request(40, 160, "after"), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.id(), "after");
}

// Behind dynamic batching a request's answer comes only when its batch is sent. A request
// without a deadline is taken by try_infer and answered from the batch's completion; one with
// parameters.timeout goes through a future that the pool thread which submitted it waits for. The
// stream must keep reading the requests after either meanwhile: 8 requests on one stream fill a
// batch of 8 (sent at once, long before the 60 s delay) only if all 8 are read while the first
// waits. Answers come in order, both kinds mixed.
TEST_F(DaemonGrpcStreams, BatchedStreamReadsOnWhileAnAnswerIsAwaited) {
  BatchingService batched(*service_, {{"gcn", {.max_size = 8, .max_queue_delay_us = 60e6}}});
  GrpcServer server(batched, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
  server.start();
  auto stub = inference::GRPCInferenceService::NewStub(channel_to(server.port(), 7));
  grpc::ClientContext ctx;
  auto s = stub->ModelStreamInfer(&ctx);
  const auto t0 = Clock::now();
  for (int i = 0; i < 8; ++i) {
    inference::ModelInferRequest r = request(20 + i, 80, "b" + std::to_string(i));
    if (i % 3 == 1) (*r.mutable_parameters())["timeout"].set_int64_param(120'000'000);  // through a future
    ASSERT_TRUE(s->Write(r));
  }
  s->WritesDone();
  inference::ModelStreamInferResponse resp;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(s->Read(&resp)) << i;
    EXPECT_EQ(resp.error_message(), "");
    EXPECT_EQ(resp.infer_response().id(), "b" + std::to_string(i));
    ASSERT_EQ(resp.infer_response().outputs_size(), 1);
    EXPECT_EQ(resp.infer_response().outputs(0).shape(0), 20 + i);
  }
  EXPECT_FALSE(s->Read(&resp));
  EXPECT_TRUE(s->Finish().ok());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30.0);
  EXPECT_EQ(batched.counts("gcn"), std::make_pair(std::uint64_t{1}, std::uint64_t{8}));
  server.stop(1.0);
}

// A stream cancelled while the batch holding its requests is still to be sent ends CANCELLED, and
// the server lets it go only once those requests' completions have come (they refer to it).
TEST_F(DaemonGrpcStreams, CancelledBatchedStreamOutlivesItsCompletions) {
  BatchingService batched(*service_, {{"gcn", {.max_size = 64, .max_queue_delay_us = 300000}}});
  GrpcServer server(batched, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
  server.start();
  auto stub = inference::GRPCInferenceService::NewStub(channel_to(server.port(), 8));
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext ctx;
    auto s = stub->ModelStreamInfer(&ctx);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Write(request(16, 64, "c" + std::to_string(i))));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // read and queued in the batch
    ctx.TryCancel();
    EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (server.streams_open() != 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server.streams_open(), 0u);
  batched.drain();
  grpc::ClientContext ctx;
  auto s = stub->ModelStreamInfer(&ctx);
  ASSERT_TRUE(s->Write(request(16, 64, "after")));
  s->WritesDone();
  inference::ModelStreamInferResponse resp;
  ASSERT_TRUE(s->Read(&resp));
  EXPECT_EQ(resp.infer_response().id(), "after");
  EXPECT_TRUE(s->Finish().ok());
  server.stop(1.0);
}

// The infer methods parse their requests themselves (grpc_wire.h): bytes that are not a
// ModelInferRequest are answered with an error naming "request", on a stream as one response (the
// stream reads on, and the next request is answered), on ModelInfer as INVALID_ARGUMENT; a request
// whose raw_input_contents come before its other fields, as protobuf allows, is answered as usual.
TEST_F(DaemonGrpcStreams, BytesThatAreNotARequestAreAnsweredAndTheStreamGoesOn) {
  auto channel = channel_to(grpc_->port(), 8);
  auto bytes_of = [](const std::string& s) {
    grpc::Slice slice(s);
    return grpc::ByteBuffer(&slice, 1);
  };
  const std::string good = request(30, 90, "good").SerializeAsString();
  // raw_input_contents first: the message with its fields in another order.
  inference::ModelInferRequest contents_only = request(30, 90, "reordered"),
                               fields_only = contents_only;
  contents_only.clear_inputs();
  contents_only.set_model_name("");
  contents_only.set_id("");
  fields_only.clear_raw_input_contents();
  const std::string reordered = contents_only.SerializeAsString() + fields_only.SerializeAsString();
  const std::vector<std::string> garbage = {std::string("\x3a\xff\xff\xff\x0f", 5),
                                            std::string("\x0b", 1),
                                            good.substr(0, good.size() / 2)};

  const grpc::internal::RpcMethod stream_method("/inference.GRPCInferenceService/ModelStreamInfer",
                                                grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, inference::ModelStreamInferResponse>>
      s(grpc::internal::ClientReaderWriterFactory<
          grpc::ByteBuffer, inference::ModelStreamInferResponse>::Create(channel.get(),
                                                                         stream_method, &ctx));
  inference::ModelStreamInferResponse resp;
  for (const std::string& bad : garbage) {
    ASSERT_TRUE(s->Write(bytes_of(bad)));
    ASSERT_TRUE(s->Read(&resp));
    EXPECT_NE(resp.error_message().find("request: is not a ModelInferRequest"), std::string::npos)
        << resp.error_message();
  }
  for (const std::string& ok : {good, reordered}) {
    ASSERT_TRUE(s->Write(bytes_of(ok)));
    ASSERT_TRUE(s->Read(&resp));
    EXPECT_EQ(resp.error_message(), "");
    ASSERT_EQ(resp.infer_response().outputs_size(), 1);
    EXPECT_EQ(resp.infer_response().outputs(0).shape(0), 30);
    EXPECT_EQ(resp.infer_response().raw_output_contents(0).size(), 30u * 16 * sizeof(float));
  }
  EXPECT_EQ(resp.infer_response().id(), "reordered");
  s->WritesDone();
  EXPECT_FALSE(s->Read(&resp));
  EXPECT_TRUE(s->Finish().ok());

  const grpc::internal::RpcMethod unary_method("/inference.GRPCInferenceService/ModelInfer",
                                               grpc::internal::RpcMethod::NORMAL_RPC, channel);
  for (const std::string& bad : garbage) {
    grpc::ClientContext c;
    inference::ModelInferResponse r;
    const grpc::Status st =
        grpc::internal::BlockingUnaryCall(channel.get(), unary_method, &c, bytes_of(bad), &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("request: is not a ModelInferRequest"), std::string::npos)
        << st.error_message();
  }
  grpc::ClientContext c;
  inference::ModelInferResponse r;
  ASSERT_TRUE(
      grpc::internal::BlockingUnaryCall(channel.get(), unary_method, &c, bytes_of(reordered), &r)
          .ok());
  EXPECT_EQ(r.id(), "reordered");
  EXPECT_EQ(r.raw_output_contents(0).size(), 30u * 16 * sizeof(float));
}
