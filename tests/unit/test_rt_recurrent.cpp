// Layer-recurrent pipelines on emulated GPUs and FPGAs: every recurrent plan the scheduler can form
// for a reduced transformer (residuals and layer norms included) and a 6-layer GCN answers as the
// single-device CPU reference does; the engine swaps between recurrent and flat plans under load
// and drains a device of a recurrent plan without losing a request.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/engine.h"
#include "runtime/planning/planner.h"
#include "scheduler/recurrent.h"
#include "test_rt_common.h"
#include "../test_rt_requests.h"

namespace dype::rt {
namespace {

using testing::expect_pipeline_matches_reference;

// Every plan of every recurrent shape that fits the system (the brute force's list), unrolled by
// to_pipeline_spec as the daemon does, checked against the reference. Returns how many ran.
int check_every_recurrent_plan(const Model& m, const std::vector<Request>& reqs, const hw::System& sys,
                               std::size_t max_round_kernels) {
  SchedPlanner planner(m, sys);
  const sched::SystemSpec spec = planner.system_spec({});
  const RuntimeCostModel cost = planner.cost_model(spec, reqs[0].characteristics());
  std::vector<sched::Shape> shapes;
  for (const sched::Shape& s : recurrent_shapes(m))
    if (static_cast<std::size_t>(s.round_kernels) <= max_round_kernels) shapes.push_back(s);
  EXPECT_FALSE(shapes.empty());
  int ran = 0;
  for (const auto& p : sched::enumerate_shape_plans(spec, cost, shapes)) {
    if (p.shape.rounds == 1) continue;
    const sched::Plan plan = sched::evaluate_recurrent(p.plan.stages, spec, cost, p.shape);
    const PipelineSpec ps = to_pipeline_spec(plan, sys, {});
    EXPECT_EQ(ps.rounds, p.shape.rounds);
    EXPECT_EQ(ps.stages.size(), p.plan.stages.size() * static_cast<std::size_t>(p.shape.rounds));
    expect_pipeline_matches_reference(m, ps, reqs, plan.mnemonic + " = " + describe(ps), 1e-5);
    ++ran;
  }
  return ran;
}

TEST(RtRecurrent, EveryRecurrentPlanOfAReducedTransformerMatchesTheReference) {
  // FPGAs with the SWAT image run the attention only; GPUs everything.
  auto sys = testing::emu_system(2, 3, false, "u280-sextans-swat.yaml");
  Model m = Model::transformer(
      {.layers = 4, .d_model = 16, .heads = 2, .ffn = 24, .residual_norm = true, .seed = 31});
  const int ran = check_every_recurrent_plan(m, testing::tf_requests(m, 40, 8, 2), sys, 14);
  std::printf("transformer: %d recurrent plans checked\n", ran);
  EXPECT_GT(ran, 20);
}

TEST(RtRecurrent, EveryRecurrentPlanOfASixLayerGcnMatchesTheReference) {
  auto sys = testing::emu_system(2, 2);  // FPGAs with the SpMM + GEMM image
  Model m = Model::gcn({.layers = 6, .in_features = 12, .hidden = 8, .seed = 32});
  const int ran = check_every_recurrent_plan(m, testing::gnn_requests(m, 90, 500, 2), sys, 4);
  std::printf("6-layer GCN: %d recurrent plans checked\n", ran);
  EXPECT_GT(ran, 20);
}

EngineOptions eo(std::size_t queue_capacity, std::size_t max_in_flight) {
  EngineOptions o;
  o.queue_capacity = queue_capacity;
  o.max_in_flight = max_in_flight;
  return o;
}

// Round 0's stages repeated `rounds` times (what to_pipeline_spec builds from a recurrent plan).
PipelineSpec unrolled(std::vector<PipelineStage> round, int rounds, int round_kernels, const std::string& label) {
  PipelineSpec spec{round, label};
  for (int r = 1; r < rounds; ++r) {
    for (PipelineStage st : round) {
      st.first += r * round_kernels;
      st.last += r * round_kernels;
      spec.stages.push_back(st);
    }
  }
  spec.rounds = rounds;
  return spec;
}

TEST(RtRecurrent, SwapsBetweenRecurrentAndFlatPlansUnderLoadLoseNothing) {
  auto sys = testing::emu_system(4, 0);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Model m = Model::gcn({.layers = 6, .in_features = 8, .hidden = 8, .seed = 33});
  const Request req = testing::gnn_requests(m, 80, 500, 1)[0];
  const HostTensor expect = reference_forward(m, req);
  std::vector<PipelineSpec> specs = {
      unrolled({{0, 0, {gpu[0]}, 0}, {1, 1, {gpu[1]}, 0}}, 6, 2, "(1G1G)x6"),
      {{{0, 5, {gpu[0], gpu[1]}, 0}, {6, 11, {gpu[2]}, 0}}, "2G1G"},
      unrolled({{0, 1, {gpu[2], gpu[3]}, 0}, {2, 3, {gpu[0]}, 0}}, 3, 4, "(2G1G)x3"),
  };
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), specs[0], req.characteristics(), eo(1, 8));
  constexpr int kRequests = 200;
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
  for (int s = 0; s < 30; ++s) e.swap_to(specs[static_cast<std::size_t>(s + 1) % specs.size()], "swap" + std::to_string(s));
  producer.join();
  e.drain();
  EXPECT_EQ(answered.load(), kRequests);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(ordered.load());
  EXPECT_EQ(e.stats().swaps, 30u);
}

TEST(RtRecurrent, DrainingADeviceOfARecurrentPlanLosesNothing) {
  auto sys = testing::emu_system(3, 0);
  auto gpu = sys.devices_of(hw::DeviceKind::gpu);
  Model m = Model::gcn({.layers = 6, .in_features = 16, .hidden = 8, .seed = 34});
  const Request req = testing::gnn_requests(m, 120, 700, 1)[0];
  const HostTensor expect = reference_forward(m, req);
  Engine e(m, std::make_shared<SchedPlanner>(m, sys),
           unrolled({{0, 0, {gpu[0]}, 0}, {1, 1, {gpu[1]}, 0}}, 6, 2, "(1G1G)x6"), req.characteristics(), eo(1, 6));
  constexpr int kRequests = 80;
  std::atomic<int> answered{0}, wrong{0};
  std::thread producer([&] {
    for (int i = 0; i < kRequests; ++i)
      e.submit(req, [&](std::uint64_t, const HostTensor* y, std::exception_ptr err) {
        if (err || !y || relative_error(*y, expect) > 1e-5) wrong++;
        answered++;
      });
  });
  while (answered.load() < 10) std::this_thread::yield();
  EXPECT_TRUE(e.drain_device("gpu1"));
  for (const auto& st : e.current_spec().stages)
    for (auto* d : st.devices) EXPECT_NE(d->name(), "gpu1");
  EXPECT_TRUE(e.wait_device_idle("gpu1", 0.0));
  producer.join();
  e.drain();
  EXPECT_EQ(answered.load(), kRequests);
  EXPECT_EQ(wrong.load(), 0);
}

// The planner itself picks a recurrent plan where it pays: the FPGAs can only run attention, so
// only a recurrent plan puts every layer's attention on them. They pay in energy: in perf mode two
// GPUs swapping their halos directly are faster, the balanced objective takes the FPGAs.
TEST(RtRecurrent, PlannerChoosesARecurrentPlanAndPredictsItBack) {
  auto sys = testing::emu_system(2, 3, true, "u280-sextans-swat.yaml");
  Model m = Model::transformer(
      {.layers = 8, .d_model = 512, .heads = 8, .ffn = 2048, .seed = 35, .materialize_weights = false});
  Request req = Request::transformer(HostTensor::shape_only(16384, 512), 4096);
  SchedPlanner planner(m, sys);
  const PlannedPipeline p = planner.plan(req.characteristics(), "balanced", {});
  EXPECT_GT(p.spec.rounds, 1) << p.mnemonic;
  EXPECT_NE(p.mnemonic.find(")x"), std::string::npos) << p.mnemonic;
  bool fpga = false;
  for (const auto& st : p.spec.stages)
    for (auto* d : st.devices) fpga = fpga || d->kind() == hw::DeviceKind::fpga;
  EXPECT_TRUE(fpga) << p.mnemonic;
  // The running pipeline's prediction is the plan's (folded back into one round).
  EXPECT_NEAR(planner.predict_period_s(p.spec, req.characteristics()), p.period_s, 1e-9 * p.period_s);
}

}  // namespace
}  // namespace dype::rt
