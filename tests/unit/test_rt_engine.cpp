// Engine: futures in order, swaps under load lose nothing, drift with hysteresis re-plans, mode
// changes, device faults re-plan and re-run, tracing as an observer.
#include <set>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "hw/emu/emu_device.h"
#include "graph/generators.h"
#include "runtime/planning/drift.h"
#include "runtime/engine.h"
#include "runtime/planning/planner.h"
#include "test_rt_common.h"

namespace dype::rt {
namespace {

EngineOptions eo(std::size_t queue_capacity, std::size_t max_in_flight) {
  EngineOptions o;
  o.queue_capacity = queue_capacity;
  o.max_in_flight = max_in_flight;
  return o;
}

Request gnn_request(const Model& m, std::shared_ptr<const Graph> g, std::uint64_t seed) {
  return Request::gnn(g, make_tensor(g->nodes, m.spec().in_features,
                                     kernels::generate_features(g->nodes, m.spec().in_features, seed)));
}

TEST(RtDrift, HysteresisSustainAndRateLimit) {
  DriftOptions o;
  o.sustain = 4;
  o.min_requests_between = 10;
  Characteristics base{.nodes = 1000, .nnz = 10000, .feature_len = 64};
  DriftDetector d(o, base);
  std::uint64_t i = 0;
  // 3% wobble stays under the 5% threshold: no signal.
  for (; i < 40; ++i) {
    Characteristics c = base;
    c.nnz = (i % 2) ? 10300 : 9700;
    EXPECT_FALSE(d.observe(c, i)) << i;
  }
  // 20% more nnz: signal on the 4th consecutive request, naming nnz.
  Characteristics big = base;
  big.nnz = 12000;
  for (int k = 0; k < 3; ++k) EXPECT_FALSE(d.observe(big, i++));
  auto s = d.observe(big, i++);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->characteristic, "nnz");
  EXPECT_EQ(s->target.nnz, 12000);
  EXPECT_NE(s->detail.find("sustained 4"), std::string::npos) << s->detail;
  // Interrupted streaks never fire.
  DriftDetector d2(o, base);
  for (std::uint64_t k = 0; k < 30; ++k) EXPECT_FALSE(d2.observe(k % 3 == 2 ? base : big, k));
  // Rate limit: a second sustained move right after a signal waits for min_requests_between.
  Characteristics bigger = base;
  bigger.nnz = 20000;
  const std::uint64_t signalled_at = i - 1;
  int fired_at = -1;
  for (int k = 0; k < 20 && fired_at < 0; ++k, ++i)
    if (d.observe(bigger, i)) fired_at = static_cast<int>(i);
  ASSERT_GE(fired_at, 0);
  EXPECT_GE(static_cast<std::uint64_t>(fired_at), signalled_at + 10);
}

TEST(RtDrift, StageTimeDriftAgainstPlannedRatio) {
  DriftOptions o;
  o.window = 8;
  o.sustain = 3;
  o.min_requests_between = 0;
  DriftDetector d(o, {.nodes = 10});
  for (int i = 0; i < 8; ++i) d.observe_stage_time(0, 1.0, 1.2);  // bias, not drift
  for (int i = 0; i < 5; ++i) d.observe_stage_time(0, 1.0, 1.22);
  EXPECT_FALSE(d.observe({.nodes = 10}, 100));
  for (int i = 0; i < 3; ++i) d.observe_stage_time(0, 1.0, 2.0);
  auto s = d.observe({.nodes = 10}, 101);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->characteristic, "stage0.time");
}

TEST(RtEngine, FuturesInOrderAndCorrect) {
  auto sys = testing::emu_system(2, 3);
  Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 4});
  auto g = Graph::from_edges(random_graph(200, 1500, 3), true);
  auto planner = std::make_shared<SchedPlanner>(m, sys);
  Engine e(m, planner, gnn_request(m, g, 1).characteristics(), eo(2, 6));
  EXPECT_FALSE(e.current_label().empty());
  std::vector<Request> reqs;
  std::vector<std::future<HostTensor>> futs;
  std::vector<std::uint64_t> order;
  std::mutex mu;
  for (int i = 0; i < 24; ++i) {
    reqs.push_back(gnn_request(m, g, 50 + i));
    futs.push_back(e.submit(reqs.back(), [&](std::uint64_t seq, const HostTensor* y, std::exception_ptr err) {
      EXPECT_TRUE(y != nullptr && !err);
      std::lock_guard lock(mu);
      order.push_back(seq);
    }));
  }
  for (int i = 0; i < 24; ++i) EXPECT_LE(relative_error(futs[i].get(), reference_forward(m, reqs[i])), 1e-5);
  e.drain();
  ASSERT_EQ(order.size(), 24u);
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
  auto st = e.stage_stats();
  ASSERT_FALSE(st.empty());
  EXPECT_EQ(st[0].requests, 24);
  EXPECT_GT(e.stats().modelled_makespan_s, 0.0);
  EXPECT_THROW(e.submit(Request::gnn(g, HostTensor::zeros(200, 3))), InputError);
}

// try_submit: taken without waiting while there is room, answered through the callback (output
// moved in, in submission order, correct); declined with the request untouched once max_in_flight
// are outstanding, taken again once answers leave; bad input is an InputError at once.
TEST(RtEngine, TrySubmitAnswersThroughTheCallbackAndDeclinesWhenFull) {
  auto sys = testing::emu_system(2, 3);
  Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 4});
  auto g = Graph::from_edges(random_graph(200, 1500, 3), true);
  auto planner = std::make_shared<SchedPlanner>(m, sys);
  Engine e(m, planner, gnn_request(m, g, 1).characteristics(), eo(2, 4));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int, HostTensor>> answers;  // (request index, its answer)
  std::vector<Request> reqs;
  int declined = 0;
  for (int i = 0; i < 40; ++i) {
    reqs.push_back(gnn_request(m, g, 70 + i));
    Request r = reqs.back();
    for (;;) {
      const bool taken = e.try_submit(r, [&, i](HostTensor y, std::exception_ptr err) {
        EXPECT_FALSE(err);
        std::lock_guard lock(mu);
        answers.emplace_back(i, std::move(y));
        cv.notify_all();
      });
      if (taken) break;
      ++declined;
      ASSERT_EQ(r.rows(), 200);  // untouched: can be submitted again
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  e.drain();
  ASSERT_EQ(answers.size(), 40u);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].first, static_cast<int>(i));
    EXPECT_LE(relative_error(answers[i].second, reference_forward(m, reqs[i])), 1e-5);
  }
  EXPECT_GT(declined, 0);  // 40 requests in a tight loop against max_in_flight 4
  Request bad = Request::gnn(g, HostTensor::zeros(200, 3));
  EXPECT_THROW(e.try_submit(bad, [](HostTensor, std::exception_ptr) {}), InputError);
  EXPECT_EQ(e.stats().completed, 40u);
}

// A daemon that re-checks its plan for weeks keeps the latest records only, while the counts by
// cause (what the metrics export) keep every re-plan.
TEST(RtEngine, ReplanRecordsAreBoundedAndCountsKeepEverything) {
  auto sys = testing::emu_system(2, 0);
  Model m = Model::gcn({.layers = 1, .in_features = 4, .hidden = 4, .seed = 2});
  auto g = Graph::from_edges(random_graph(20, 60, 1), true);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), gnn_request(m, g, 1).characteristics(), eo(2, 4));
  const std::size_t extra = Engine::kMaxReplanRecords + 100;
  for (std::size_t i = 0; i < extra; ++i) e.replan("recheck", "same characteristics");
  const auto records = e.replans();
  EXPECT_EQ(records.size(), Engine::kMaxReplanRecords);
  EXPECT_EQ(records.back().cause, "recheck");
  EXPECT_FALSE(records.back().swapped);  // nothing changed: the plan stands
  const auto counts = e.replan_counts();
  EXPECT_EQ(counts.at({"recheck", false}), extra);
  EXPECT_EQ(counts.at({"initial", true}), 1u);
}

TEST(RtEngine, HundredSwapsUnderLoadLoseNothing) {
  auto sys = testing::emu_system(4, 0);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Model m = Model::gin({.layers = 2, .in_features = 8, .hidden = 8, .seed = 12});
  auto g = Graph::from_edges(random_graph(80, 500, 5), false);
  const Request req = gnn_request(m, g, 7);
  const HostTensor expect = reference_forward(m, req);
  std::vector<PipelineSpec> specs = {
      {{{0, 5, {gpu[0]}, 0}}, "1G"},
      {{{0, 2, {gpu[1], gpu[2]}, 0}, {3, 5, {gpu[3]}, 0}}, "2G1G"},
      {{{0, 0, {gpu[0]}, 0}, {1, 3, {gpu[1]}, 0}, {4, 5, {gpu[2], gpu[3]}, 0}}, "1G1G2G"},
  };
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), specs[0], req.characteristics(),
           eo(1, 8));
  constexpr int kRequests = 400;
  std::atomic<int> answered{0}, wrong{0};
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> ordered{true};
  std::thread producer([&] {
    for (int i = 0; i < kRequests; ++i) {
      e.submit(req, [&](std::uint64_t seq, const HostTensor* y, std::exception_ptr err) {
        if (seq != next.fetch_add(1)) ordered = false;
        if (err || !y || relative_error(*y, expect) > 1e-5) wrong++;
        answered++;
      });
    }
  });
  for (int s = 0; s < 100; ++s) e.swap_to(specs[static_cast<std::size_t>(s + 1) % specs.size()], "swap" + std::to_string(s));
  producer.join();
  e.drain();
  EXPECT_EQ(answered.load(), kRequests);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(ordered.load());
  const auto st = e.stats();
  EXPECT_EQ(st.swaps, 100u);
  EXPECT_EQ(st.epoch, 101u);
  EXPECT_EQ(st.completed, static_cast<std::uint64_t>(kRequests));
  EXPECT_GT(st.max_pause_s, 0.0);  // measured
  const auto rec = e.replans();
  ASSERT_EQ(rec.size(), 101u);
  EXPECT_EQ(rec.back().cause, "manual");
}

TEST(RtEngine, DriftReplansWithCause) {
  auto sys = testing::emu_system(2, 3, true);  // timing-only: paper-scale shapes
  Model m = Model::gcn({.layers = 2, .in_features = 128, .hidden = 128, .materialize_weights = false});
  auto small = Graph::shape_only(20000, 200000);
  auto large = Graph::shape_only(400000, 40000000);
  EngineOptions o;
  o.drift.sustain = 4;
  o.drift.min_requests_between = 4;
  o.drift.min_gain = 0.0;
  o.replan_beside = false;  // the swap serves the detecting request: at_request is exact
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), Request::gnn(small, HostTensor::shape_only(20000, 128)).characteristics(), o);
  for (int i = 0; i < 10; ++i) e.submit(Request::gnn(small, HostTensor::shape_only(20000, 128)));
  for (int i = 0; i < 10; ++i) e.submit(Request::gnn(large, HostTensor::shape_only(400000, 128)));
  e.drain();
  const auto rec = e.replans();
  bool drift = false;
  for (const auto& r : rec) {
    if (r.cause != "drift") continue;
    drift = true;
    EXPECT_TRUE(r.detail.find("nodes") != std::string::npos || r.detail.find("nnz") != std::string::npos) << r.detail;
    EXPECT_FALSE(r.old_plan.empty());
    EXPECT_FALSE(r.new_plan.empty());
    EXPECT_EQ(r.at_request, 13u);  // 4th request of the new phase
  }
  EXPECT_TRUE(drift);
  EXPECT_EQ(e.stats().completed, 20u);
}

// A planner whose drift solves block until released: requests submitted while it is stuck are
// queued and answered on the current plan; the swap lands once the solve returns.
class StallingPlanner final : public Planner {
 public:
  explicit StallingPlanner(std::shared_ptr<Planner> real) : real_(std::move(real)) {}
  PlannedPipeline plan(const Characteristics& c, const std::string& mode, const std::set<std::string>& ex) override {
    {
      std::unique_lock lock(mu_);
      ++calls_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !stalled_; });
    }
    return real_->plan(c, mode, ex);
  }
  double predict_period_s(const PipelineSpec& s, const Characteristics& c) override { return real_->predict_period_s(s, c); }
  double predict_score(const PipelineSpec& s, const Characteristics& c, const std::string& m) override {
    return real_->predict_score(s, c, m);
  }
  void stall(bool on) {
    std::lock_guard lock(mu_);
    stalled_ = on;
    cv_.notify_all();
  }
  bool wait_calls(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return calls_ >= n; });
  }

 private:
  std::shared_ptr<Planner> real_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stalled_ = false;
  int calls_ = 0;
};

TEST(RtEngine, RequestsKeepFlowingWhileTheDriftSolveIsStuck) {
  auto sys = testing::emu_system(2, 3, true);
  Model m = Model::gcn({.layers = 2, .in_features = 128, .hidden = 128, .materialize_weights = false});
  auto small = Graph::shape_only(20000, 200000);
  auto large = Graph::shape_only(400000, 40000000);
  auto planner = std::make_shared<StallingPlanner>(std::make_shared<SchedPlanner>(m, sys));
  EngineOptions o;
  o.drift.sustain = 4;
  o.drift.min_requests_between = 4;
  o.drift.min_gain = 0.0;
  Engine e(m, planner, Request::gnn(small, HostTensor::shape_only(20000, 128)).characteristics(), o);
  ASSERT_TRUE(planner->wait_calls(1));  // the first plan
  const std::string first = e.current_label();
  std::vector<std::future<HostTensor>> answers;
  for (int i = 0; i < 10; ++i) answers.push_back(e.submit(Request::gnn(small, HostTensor::shape_only(20000, 128))));
  planner->stall(true);
  for (int i = 0; i < 4; ++i) answers.push_back(e.submit(Request::gnn(large, HostTensor::shape_only(400000, 128))));
  // The drift solve started on the 4th large request, and is stuck.
  const bool started = planner->wait_calls(2);
  if (!started) planner->stall(false);
  ASSERT_TRUE(started) << "no drift solve was started";
  // 40 more requests are submitted and answered while it is stuck, on the first plan.
  for (int i = 0; i < 40; ++i) answers.push_back(e.submit(Request::gnn(large, HostTensor::shape_only(400000, 128))));
  for (auto& f : answers) EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(e.stats().completed, 54u);
  EXPECT_EQ(e.current_label(), first);
  EXPECT_EQ(e.epoch(), 1u);
  planner->stall(false);
  e.wait_replans();
  bool swapped = false;
  for (const auto& r : e.replans()) {
    if (r.cause != "drift") continue;
    swapped = r.swapped;
    EXPECT_GE(r.at_request, 54u);  // it serves the requests submitted after it landed
    EXPECT_LT(r.pause_s, 5.0);     // building the pipeline, not the stuck solve
  }
  EXPECT_TRUE(swapped);
  EXPECT_NE(e.current_label(), first);
  e.submit(Request::gnn(large, HostTensor::shape_only(400000, 128))).get();
  EXPECT_EQ(e.stats().completed, 55u);
}

TEST(RtEngine, ModeChangeReplans) {
  auto sys = testing::emu_system(2, 3, true);
  Model m = Model::gcn({.layers = 2, .in_features = 128, .hidden = 128, .materialize_weights = false});
  auto g = Graph::shape_only(200000, 4000000);
  Request r = Request::gnn(g, HostTensor::shape_only(200000, 128));
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), r.characteristics());
  e.submit(r);
  e.set_mode("energy");
  e.submit(r).get();
  EXPECT_THROW(e.set_mode("fastest"), InputError);
  const auto rec = e.replans();
  ASSERT_GE(rec.size(), 2u);
  EXPECT_EQ(rec[1].cause, "mode");
  EXPECT_EQ(rec[1].detail, "mode perf -> energy");
}

TEST(RtEngine, DeviceFaultReplansAndReruns) {
  auto sys = testing::emu_system(3, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 21});
  auto g = Graph::from_edges(random_graph(120, 900, 8), true);
  Request req = gnn_request(m, g, 3);
  const HostTensor expect = reference_forward(m, req);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), PipelineSpec{{{0, 1, {gpu[0]}, 0}, {2, 3, {gpu[1]}, 0}}, "1G1G"},
           req.characteristics(), eo(2, 6));
  std::vector<std::future<HostTensor>> futs;
  for (int i = 0; i < 5; ++i) futs.push_back(e.submit(req));
  static_cast<hw::EmuDevice*>(gpu[1])->inject_fault(3, "ECC error");
  for (int i = 0; i < 20; ++i) futs.push_back(e.submit(req));
  for (auto& f : futs) EXPECT_LE(relative_error(f.get(), expect), 1e-5);
  const auto st = e.stats();
  ASSERT_EQ(st.failed_devices.size(), 1u);
  EXPECT_EQ(st.failed_devices[0], "gpu1");
  EXPECT_GE(st.reruns, 1u);
  EXPECT_EQ(st.completed, 25u);
  bool fault = false;
  for (const auto& r : e.replans()) {
    if (r.cause == "fault") {
      fault = true;
      EXPECT_NE(r.detail.find("gpu1"), std::string::npos) << r.detail;
      EXPECT_NE(r.detail.find("ECC error"), std::string::npos) << r.detail;
    }
  }
  EXPECT_TRUE(fault);
  for (const auto& s : e.current_spec().stages)
    for (auto* d : s.devices) EXPECT_NE(d->name(), "gpu1");
}

TEST(RtEngine, FaultWithNoDeviceLeftNamesTheDevice) {
  auto sys = testing::emu_system(1, 0);
  Model m = Model::gcn({.layers = 1, .in_features = 4, .hidden = 4, .seed = 2});
  auto g = Graph::from_edges(random_graph(30, 100, 8), true);
  Request req = gnn_request(m, g, 3);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), req.characteristics());
  static_cast<hw::EmuDevice*>(sys.devices_of(hw::DeviceKind::gpu)[0])->inject_fault(0, "link down");
  auto f = e.submit(req);
  try {
    f.get();
    FAIL() << "expected a DeviceError";
  } catch (const hw::DeviceError& err) {
    EXPECT_EQ(err.device(), "gpu0");
    EXPECT_NE(std::string(err.what()).find("gpu0"), std::string::npos);
  }
  EXPECT_EQ(e.stats().failed, 1u);
}

TEST(RtEngine, DrainDeviceUnderLoadLosesNothingAndUndrainReadmits) {
  auto sys = testing::emu_system(3, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 16, .hidden = 8, .seed = 23});
  auto g = Graph::from_edges(random_graph(150, 900, 9), true);
  const Request req = gnn_request(m, g, 4);
  const HostTensor expect = reference_forward(m, req);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), PipelineSpec{{{0, 1, {gpu[0]}, 0}, {2, 3, {gpu[1]}, 0}}, "1G1G"},
           req.characteristics(), eo(1, 6));
  constexpr int kRequests = 120;
  std::atomic<int> answered{0}, wrong{0};
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> ordered{true};
  std::thread producer([&] {
    for (int i = 0; i < kRequests; ++i)
      e.submit(req, [&](std::uint64_t seq, const HostTensor* y, std::exception_ptr err) {
        if (seq != next.fetch_add(1)) ordered = false;
        if (err || !y || relative_error(*y, expect) > 1e-5) wrong++;
        answered++;
      });
  });
  // Drain gpu1 while requests stream: once drain_device returns no pipeline with work uses it.
  while (answered.load() < 10) std::this_thread::yield();
  EXPECT_TRUE(e.drain_device("gpu1"));
  for (const auto& st : e.current_spec().stages)
    for (auto* d : st.devices) EXPECT_NE(d->name(), "gpu1");
  EXPECT_TRUE(e.wait_device_idle("gpu1", 0.0));
  EXPECT_EQ(e.drained_devices(), std::set<std::string>{"gpu1"});
  e.undrain_device("gpu1");
  producer.join();
  e.drain();
  EXPECT_EQ(answered.load(), kRequests);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(ordered.load());
  EXPECT_TRUE(e.drained_devices().empty());
  std::vector<std::string> causes;
  for (const auto& r : e.replans()) causes.push_back(r.cause);
  EXPECT_NE(std::find(causes.begin(), causes.end(), "drain"), causes.end());
  EXPECT_NE(std::find(causes.begin(), causes.end(), "undrain"), causes.end());
  // The modelled energy of every answered request is counted.
  EXPECT_GT(e.stats().modelled_energy_j, 0.0);

  // Draining the last device leaves no plan: refused, the device stays in service.
  auto one = testing::emu_system(1, 0);
  Engine e1(m, std::make_shared<SchedPlanner>(m, one), req.characteristics());
  EXPECT_THROW(e1.drain_device("gpu0"), Error);
  EXPECT_TRUE(e1.drained_devices().empty());
  EXPECT_LE(relative_error(e1.submit(req).get(), expect), 1e-5);
}

TEST(RtEngine, ChromeTraceObserver) {
  auto sys = testing::emu_system(2, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 8, .hidden = 8});
  auto g = Graph::from_edges(random_graph(50, 200, 8), true);
  Request req = gnn_request(m, g, 3);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), PipelineSpec{{{0, 1, {gpu[0]}, 0}, {2, 3, {gpu[1]}, 0}}, "1G1G"},
           req.characteristics());
  auto trace = std::make_shared<ChromeTraceObserver>();
  e.add_observer(trace);
  e.swap_to(PipelineSpec{{{0, 3, {gpu[0], gpu[1]}, 0}}, "2G"});  // observers attach to new epochs
  for (int i = 0; i < 5; ++i) e.submit(req);
  e.drain();
  const auto j = nlohmann::json::parse(trace->json());
  int stage_events = 0, modelled = 0;
  for (const auto& ev : j["traceEvents"]) {
    if (ev.value("ph", "") == "X") {
      ++stage_events;
      if (ev["pid"] == 2) ++modelled;
    }
  }
  EXPECT_EQ(stage_events, 10);  // 5 requests x 1 stage x (measured + modelled)
  EXPECT_EQ(modelled, 5);
}

// A request whose client stopped waiting (its token expired) is not run: its answer is
// RequestCancelled, counted apart from failures, and the requests around it are answered as usual.
TEST(RtEngine, ExpiredRequestsAreNotRunAndCountedAsCancelled) {
  auto sys = testing::emu_system(2, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 8, .hidden = 8});
  auto g = Graph::from_edges(random_graph(50, 200, 8), true);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), PipelineSpec{{{0, 1, {gpu[0]}, 0}, {2, 3, {gpu[1]}, 0}}, "1G1G"},
           gnn_request(m, g, 1).characteristics());
  const HostTensor expect = reference_forward(m, gnn_request(m, g, 1));
  auto cancelled = std::make_shared<CancelToken>();
  cancelled->cancelled = true;
  auto past = std::make_shared<CancelToken>();
  past->deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  auto parent = std::make_shared<CancelToken>();
  auto child = std::make_shared<CancelToken>();
  child->parent = parent;
  parent->cancelled = true;  // a cancelled stream expires its requests
  auto alive = std::make_shared<CancelToken>();
  alive->deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  std::vector<std::future<HostTensor>> answers;
  for (const auto& t : std::vector<std::shared_ptr<const CancelToken>>{nullptr, cancelled, past, child, alive}) {
    Request r = gnn_request(m, g, 1);
    r.set_cancel(t);
    answers.push_back(e.submit(std::move(r)));
  }
  EXPECT_LE(relative_error(answers[0].get(), expect), 1e-5);
  for (int i : {1, 2, 3}) {
    try {
      answers[static_cast<std::size_t>(i)].get();
      ADD_FAILURE() << "request " << i << " ran";
    } catch (const RequestCancelled& err) {
      EXPECT_NE(std::string(err.what()).find("cancelled before stage 0"), std::string::npos) << err.what();
    }
  }
  EXPECT_LE(relative_error(answers[4].get(), expect), 1e-5);
  const EngineStats st = e.stats();
  EXPECT_EQ(st.cancelled, 3u);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.completed, 2u);
}

// A bounded trace keeps the most recent events and says how many it dropped.
// An observer added while a pipeline runs hears that pipeline from then on: no re-plan needed.
TEST(RtEngine, AnObserverAddedLaterHearsTheRunningPipeline) {
  auto sys = testing::emu_system(2, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 8, .hidden = 8});
  auto g = Graph::from_edges(random_graph(50, 200, 8), true);
  Request req = gnn_request(m, g, 3);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  EngineOptions o;
  o.drift.enabled = false;  // no re-plan: the pipeline that runs is the first one
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), PipelineSpec{{{0, 1, {gpu[0]}, 0}, {2, 3, {gpu[1]}, 0}}, "1G1G"},
           req.characteristics(), o);
  for (int i = 0; i < 2; ++i) e.submit(req);
  e.drain();
  const std::uint64_t epoch = e.epoch();
  auto heard = std::make_shared<RequestEventQueue>();
  e.add_observer(heard);
  for (int i = 0; i < 3; ++i) e.submit(req);
  e.drain();
  EXPECT_EQ(e.epoch(), epoch);
  const std::vector<RequestEvent> events = heard->take();
  ASSERT_EQ(events.size(), 3u);
  for (const RequestEvent& ev : events) EXPECT_EQ(ev.epoch, epoch);
}

TEST(RtEngine, ChromeTraceObserverKeepsTheMostRecentEvents) {
  auto sys = testing::emu_system(2, 0);
  Model m = Model::gcn({.layers = 2, .in_features = 8, .hidden = 8});
  auto g = Graph::from_edges(random_graph(50, 200, 8), true);
  Request req = gnn_request(m, g, 3);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  auto trace = std::make_shared<ChromeTraceObserver>(6);
  EngineOptions o;
  o.observers = {trace};  // from the first pipeline on
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), PipelineSpec{{{0, 3, {gpu[0]}, 0}}, "1G"}, req.characteristics(), o);
  for (int i = 0; i < 20; ++i) e.submit(req);
  e.drain();
  EXPECT_EQ(trace->events(), 6u);
  // 20 requests x (measured + modelled), and the initial plan's record, less the 6 kept.
  EXPECT_EQ(trace->dropped(), 35u);
  const auto j = nlohmann::json::parse(trace->json());
  bool said = false;
  std::set<std::string> names;
  for (const auto& ev : j["traceEvents"]) {
    if (ev.value("name", "") == "trace_dropped") said = ev["args"]["dropped_events"] == 35;
    if (ev.value("ph", "") == "X") names.insert(ev["name"].get<std::string>());
  }
  EXPECT_TRUE(said) << j.dump();
  EXPECT_EQ(names, (std::set<std::string>{"req 17", "req 18", "req 19"})) << j.dump();
}

}  // namespace
}  // namespace dype::rt
