// Dynamic batching (runtime/daemon/batching_service.h) in front of the real EngineService
// (emulated paper testbed): concurrent small GNN requests merged into block-diagonal batches give
// each request exactly its own answer, as the single-device CPU reference computes it for that
// graph alone, for GCN, GIN and GraphSAGE (two CSR rows per node); a bad request is refused alone
// and at once; transformer requests pass straight through; drain() answers what is queued.
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/daemon/batching_service.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/errors.h"

using namespace dype;
using namespace dype::rt::daemon;

namespace {

EngineServiceOptions gnn_models() {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  o.mode = "perf";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 16, .hidden = 32, .seed = 5};
  rt::ModelSpec gin{.family = rt::ModelFamily::gin, .layers = 2, .in_features = 16, .hidden = 32, .seed = 6};
  rt::ModelSpec sage{.family = rt::ModelFamily::sage, .layers = 2, .in_features = 16, .hidden = 32, .seed = 7};
  rt::ModelSpec tf{.family = rt::ModelFamily::transformer, .layers = 1, .d_model = 32, .heads = 2, .ffn = 64, .seed = 8};
  o.models = {{"gcn", gcn, {.nodes = 64, .nnz = 320, .feature_len = 16}},
              {"gin", gin, {.nodes = 64, .nnz = 320, .feature_len = 16}},
              {"sage", sage, {.nodes = 64, .nnz = 320, .feature_len = 16}},
              {"tf", tf, {.feature_len = 32, .seq_len = 64, .window = 4}}};
  return o;
}

rt::Request gnn_request(const rt::Model& model, std::int64_t nodes, std::uint64_t seed) {
  const kernels::EdgeList edges = rt::random_graph(nodes, nodes * 4, seed);
  std::shared_ptr<const rt::Graph> g;
  if (model.family() == rt::ModelFamily::sage) g = rt::Graph::sage_mean(edges);
  else g = rt::Graph::from_edges(edges, model.family() == rt::ModelFamily::gcn, model.spec().gin_eps);
  std::vector<float> x(static_cast<std::size_t>(nodes * 16));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u + seed) % 1000) / 500.0f - 1.0f;
  return rt::Request::gnn(g, rt::make_tensor(nodes, 16, std::move(x)));
}

class DaemonBatching : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { service_ = new EngineService(gnn_models()); }
  static void TearDownTestSuite() {
    delete service_;
    service_ = nullptr;
  }
  static EngineService* service_;
};
EngineService* DaemonBatching::service_ = nullptr;

TEST_F(DaemonBatching, BatchedAnswersEqualEachGraphsOwnReference) {
  BatchingService batched(*service_, {{"", {.max_size = 8, .max_queue_delay_us = 20000}}});
  for (const char* name : {"gcn", "gin", "sage"}) {
    const rt::Model& model = *service_->model(name).model;
    std::vector<rt::Request> requests;
    std::vector<std::future<rt::HostTensor>> answers;
    for (int i = 0; i < 24; ++i) requests.push_back(gnn_request(model, 5 + (i * 7) % 60, 100 + i));
    // Submitted from several threads at once, as concurrent clients would.
    std::vector<std::thread> clients;
    answers.resize(requests.size());
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, t] {
        for (std::size_t i = static_cast<std::size_t>(t); i < requests.size(); i += 4) {
          std::int64_t version = 0;
          answers[i] = batched.infer(name, requests[i], &version);
          EXPECT_EQ(version, 1);
        }
      });
    }
    for (auto& c : clients) c.join();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const rt::HostTensor y = answers[i].get();
      const rt::HostTensor want = rt::reference_forward(model, requests[i]);
      ASSERT_EQ(y.rows, want.rows) << name << " request " << i;
      ASSERT_EQ(y.cols, want.cols);
      EXPECT_LT(rt::relative_error(y, want), 1e-5) << name << " request " << i;
    }
  }
  const std::string metrics = batched.metrics_text();
  for (const char* name : {"gcn", "gin", "sage"})
    EXPECT_NE(metrics.find(std::string("dype_batched_requests_total{model=\"") + name + "\"} 24"), std::string::npos)
        << metrics;
  // 24 requests each, at most 8 to a batch: some batches held more than one.
  EXPECT_NE(metrics.find("dype_batches_total{model=\"gcn\"}"), std::string::npos);
  const auto at = metrics.find("dype_batches_total{model=\"gcn\"} ");
  const int batches = std::stoi(metrics.substr(at + std::string("dype_batches_total{model=\"gcn\"} ").size()));
  EXPECT_GE(batches, 3);
  EXPECT_LT(batches, 24);
}

TEST_F(DaemonBatching, ABadRequestIsRefusedAloneAndAtOnce) {
  BatchingService batched(*service_, {{"gcn", {.max_size = 16, .max_queue_delay_us = 50000}}});
  const rt::Model& model = *service_->model("gcn").model;
  auto good = batched.infer("gcn", gnn_request(model, 20, 1), nullptr);
  rt::Request bad = gnn_request(model, 20, 2);
  bad = rt::Request::gnn(bad.graph(), rt::make_tensor(19, 16, std::vector<float>(19 * 16, 0.5f)));
  EXPECT_THROW(batched.infer("gcn", bad, nullptr), InputError);
  EXPECT_THROW(batched.infer("nosuch", gnn_request(model, 20, 3), nullptr), NotFound);
  const rt::HostTensor y = good.get();  // sent when the delay runs out, alone
  EXPECT_EQ(y.rows, 20);
}

TEST_F(DaemonBatching, OtherModelsAndTransformersPassStraightThrough) {
  BatchingService batched(*service_, {{"gin", {.max_size = 8, .max_queue_delay_us = 1000}}});
  EXPECT_EQ(batched.policy_for("gcn"), nullptr);
  ASSERT_NE(batched.policy_for("gin"), nullptr);
  const rt::Model& gcn = *service_->model("gcn").model;
  EXPECT_EQ(batched.infer("gcn", gnn_request(gcn, 10, 4), nullptr).get().rows, 10);
  BatchingService all(*service_, {{"", {.max_size = 8, .max_queue_delay_us = 1000}}});
  std::vector<float> x(64 * 32, 0.25f);
  const rt::HostTensor y = all.infer("tf", rt::Request::transformer(rt::make_tensor(64, 32, x), 4), nullptr).get();
  EXPECT_EQ(y.rows, 64);
  EXPECT_EQ(all.metrics_text().find("dype_batches_total"), std::string::npos);  // no batcher was made
}

// A model's config.yaml dynamic_batching batches it without any --batch; a --batch entry for the
// model itself takes precedence (here: max size 1, no batching).
TEST(DaemonBatchingConfig, AModelsOwnConfigBatchesItAndBatchOverridesIt) {
  EngineServiceOptions o = gnn_models();
  o.models.resize(1);  // gcn
  o.models[0].batching = rt::DynamicBatching{.max_batch_size = 8, .max_queue_delay_us = 200000};
  EngineService service(o);
  ASSERT_TRUE(service.model("gcn").batching);
  const rt::Model& model = *service.model("gcn").model;
  BatchingService from_config(service, {});
  ASSERT_TRUE(from_config.effective_policy("gcn", service.model("gcn").batching));
  EXPECT_EQ(from_config.effective_policy("gcn", service.model("gcn").batching)->max_size, 8);
  std::vector<std::future<rt::HostTensor>> answers;
  std::vector<rt::HostTensor> expect;
  for (int i = 0; i < 8; ++i) {
    rt::Request r = gnn_request(model, 12, 40 + static_cast<std::uint64_t>(i));
    expect.push_back(rt::reference_forward(model, r));
    answers.push_back(from_config.infer("gcn", std::move(r), nullptr));
  }
  for (std::size_t i = 0; i < answers.size(); ++i) EXPECT_LE(rt::relative_error(answers[i].get(), expect[i]), 1e-4);
  const auto [batches, requests] = from_config.counts("gcn");
  EXPECT_EQ(requests, 8u);
  EXPECT_LT(batches, 8u);  // merged: 8 requests inside the 200 ms delay
  BatchingService overridden(service, {{"gcn", {.max_size = 1}}});
  EXPECT_FALSE(overridden.effective_policy("gcn", service.model("gcn").batching));
  EXPECT_EQ(overridden.infer("gcn", gnn_request(model, 12, 50), nullptr).get().rows, 12);
  EXPECT_EQ(overridden.counts("gcn").second, 0u);
}

TEST_F(DaemonBatching, DrainSendsWhatIsQueuedWithoutWaitingForTheDelay) {
  BatchingService batched(*service_, {{"", {.max_size = 64, .max_queue_delay_us = 60e6}}});
  const rt::Model& model = *service_->model("gcn").model;
  std::vector<std::future<rt::HostTensor>> answers;
  for (int i = 0; i < 5; ++i) answers.push_back(batched.infer("gcn", gnn_request(model, 8, 10 + i), nullptr));
  const auto t0 = std::chrono::steady_clock::now();
  batched.drain();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  for (auto& a : answers) EXPECT_EQ(a.wait_for(std::chrono::seconds(0)), std::future_status::ready);
}

// The sender is woken only by a batch's first request (its delay starts) and by a full batch: a
// batch that fills (by requests or by nodes) goes at once, long before its delay, and a request
// that arrives after it starts the next batch's delay.
TEST_F(DaemonBatching, AFullBatchGoesAtOnceAndTheNextRequestStartsANewDelay) {
  const rt::Model& model = *service_->model("gcn").model;
  {
    BatchingService by_size(*service_, {{"", {.max_size = 4, .max_queue_delay_us = 60e6}}});
    std::vector<std::future<rt::HostTensor>> answers;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) answers.push_back(by_size.infer("gcn", gnn_request(model, 8, 60 + i), nullptr));
    for (auto& a : answers) ASSERT_EQ(a.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
    EXPECT_EQ(by_size.counts("gcn"), std::make_pair(std::uint64_t{1}, std::uint64_t{4}));
    by_size.drain();
  }
  {
    BatchingService by_nodes(*service_, {{"", {.max_size = 64, .max_queue_delay_us = 60e6, .max_nodes = 40}}});
    std::vector<std::future<rt::HostTensor>> answers;
    for (int i = 0; i < 4; ++i) answers.push_back(by_nodes.infer("gcn", gnn_request(model, 10, 70 + i), nullptr));
    for (auto& a : answers) ASSERT_EQ(a.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_EQ(by_nodes.counts("gcn"), std::make_pair(std::uint64_t{1}, std::uint64_t{4}));
    by_nodes.drain();
  }
  {
    BatchingService short_delay(*service_, {{"", {.max_size = 4, .max_queue_delay_us = 20000}}});
    std::vector<std::future<rt::HostTensor>> answers;
    std::vector<rt::HostTensor> expect;
    for (int i = 0; i < 5; ++i) {
      rt::Request r = gnn_request(model, 6 + i, 80 + static_cast<std::uint64_t>(i));
      expect.push_back(rt::reference_forward(model, r));
      answers.push_back(short_delay.infer("gcn", std::move(r), nullptr));
    }
    for (std::size_t i = 0; i < answers.size(); ++i) {
      ASSERT_EQ(answers[i].wait_for(std::chrono::seconds(30)), std::future_status::ready) << i;
      EXPECT_LT(rt::relative_error(answers[i].get(), expect[i]), 1e-5) << i;
    }
    EXPECT_EQ(short_delay.counts("gcn"), std::make_pair(std::uint64_t{2}, std::uint64_t{5}));  // 4 at once, then 1
  }
}

// try_infer takes a batched request at once (joining a batch never waits) and its completion gets
// the graph's own answer on the batcher's thread; a bad request throws as infer() does; a model
// that is not batched goes to the inner service's try_infer.
TEST_F(DaemonBatching, TryInferJoinsABatchAndIsAnsweredThroughItsCompletion) {
  BatchingService batched(*service_, {{"gcn", {.max_size = 6, .max_queue_delay_us = 60e6}}});
  const rt::Model& model = *service_->model("gcn").model;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<rt::HostTensor>> got(6);
  std::vector<std::thread::id> threads;
  std::vector<rt::HostTensor> expect;
  for (int i = 0; i < 6; ++i) {
    rt::Request r = gnn_request(model, 9 + 3 * i, 90 + static_cast<std::uint64_t>(i));
    expect.push_back(rt::reference_forward(model, r));
    InferenceService::InferDone done = [&, i](rt::HostTensor y, std::exception_ptr error) {
      std::lock_guard lock(mu);
      EXPECT_FALSE(error);
      got[static_cast<std::size_t>(i)] = std::move(y);
      threads.push_back(std::this_thread::get_id());
      cv.notify_all();
    };
    std::int64_t version = 0;
    ASSERT_TRUE(batched.try_infer("gcn", r, &version, done)) << i;
    EXPECT_EQ(version, 1);
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return threads.size() == 6; }));  // a full batch
    for (const std::thread::id t : threads) EXPECT_NE(t, std::this_thread::get_id());
  }
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LT(rt::relative_error(*got[i], expect[i]), 1e-5) << i;
  EXPECT_EQ(batched.counts("gcn"), std::make_pair(std::uint64_t{1}, std::uint64_t{6}));
  rt::Request bad = gnn_request(model, 20, 2);
  bad = rt::Request::gnn(bad.graph(), rt::make_tensor(19, 16, std::vector<float>(19 * 16, 0.5f)));
  InferenceService::InferDone never = [](rt::HostTensor, std::exception_ptr) { ADD_FAILURE() << "answered"; };
  EXPECT_THROW(batched.try_infer("gcn", bad, nullptr, never), InputError);
  // gin is not batched here: the engine's try_infer takes it or declines it (then it is untouched).
  rt::Request plain = gnn_request(*service_->model("gin").model, 10, 3);
  std::promise<rt::HostTensor> answer;
  InferenceService::InferDone to_promise = [&](rt::HostTensor y, std::exception_ptr error) {
    if (error) answer.set_exception(error);
    else answer.set_value(std::move(y));
  };
  if (batched.try_infer("gin", plain, nullptr, to_promise)) EXPECT_EQ(answer.get_future().get().rows, 10);
  else EXPECT_EQ(plain.graph()->nodes, 10);
  EXPECT_EQ(batched.counts("gin"), std::make_pair(std::uint64_t{0}, std::uint64_t{0}));
  batched.drain();
}

TEST(DaemonBatchSpec, ParsesAndRefusesPrecisely) {
  auto [m1, p1] = parse_batch_spec("32");
  EXPECT_EQ(m1, "");
  EXPECT_EQ(p1.max_size, 32);
  auto [m2, p2] = parse_batch_spec("karate-gcn=16/250");
  EXPECT_EQ(m2, "karate-gcn");
  EXPECT_EQ(p2.max_size, 16);
  EXPECT_DOUBLE_EQ(p2.max_queue_delay_us, 250.0);
  EXPECT_THROW(parse_batch_spec("=8"), InputError);
  EXPECT_THROW(parse_batch_spec("gcn=eight"), InputError);
  EXPECT_THROW(parse_batch_spec("gcn=8/-1"), InputError);
  EXPECT_THROW(parse_batch_spec("2.5"), InputError);
  try {
    parse_batch_spec("gcn=x");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("MAX_SIZE 'x' is not a non-negative number"), std::string::npos) << e.what();
  }
}

}  // namespace
