// Where a registered graph's answers come from, priced by the planner
// (runtime/planning/incremental_pricing.h): on an emulated host with GPUs, a one-edge update's
// recompute on the host CPU costs far less than running even its answer's small computation
// subgraph through a planned pipeline, while a bulk load (every layer recomputed whole on the CPU)
// costs more than the whole graph on the GPUs; the choice follows the stream with ski-rental
// hysteresis; and a graph registry priced this way answers from the pipeline after bulk loads and
// from its kept activations again once the updates are small, exact throughout.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "graph/generators.h"
#include "runtime/daemon/graph_registry.h"
#include "runtime/engine.h"
#include "runtime/incremental/computation_subgraph.h"
#include "runtime/planning/incremental_pricing.h"
#include "test_rt_common.h"

namespace dype::rt {
namespace {

std::shared_ptr<const Model> gcn_model(std::int64_t in = 128) {
  return std::make_shared<const Model>(
      Model::gcn({.layers = 2, .in_features = in, .hidden = 128, .out_features = 16}));
}

IncrementalPricer::PlanningState perf_state() {
  return [] { return std::optional{std::pair{std::string("perf"), std::set<std::string>{}}}; };
}

TEST(IncrementalPricing, SmallUpdatesPriceKeptBulkLoadsPricePipeline) {
  const hw::System sys = testing::emu_system(2, 0, /*timing_only=*/true);
  const auto model = gcn_model();
  auto planner = std::make_shared<SchedPlanner>(*model, sys);
  IncrementalPricer pricer(model, planner, perf_state());
  ASSERT_TRUE(pricer.host_cpu());
  const std::int64_t n = 68471, e = 500000;  // the Debian dependency graph's size

  IncrementalStats one_edge;  // what an added edge reaches: its target, then its out-neighbours
  one_edge.projected = {0, 2};
  one_edge.rows = {2, 30};
  one_edge.nnz = {8, 60};
  const IncrementalCosts small = pricer.price(one_edge, {.nodes = 400, .nnz = 3000}, n, e);
  std::printf("one edge: kept %.3g s, pipeline %.3g s (%s), rebuild %.3g s\n", small.kept_s,
              small.pipeline_s, small.pipeline_plan.c_str(), small.rebuild_s);
  EXPECT_LT(small.kept_s, small.pipeline_s);
  EXPECT_LT(small.kept_s * 100, small.rebuild_s);

  IncrementalStats bulk;
  bulk.rebuilt = true;
  bulk.projected = bulk.rows = {n, n};
  bulk.nnz = {e + n, e + n};
  const IncrementalCosts big = pricer.price(bulk, {.nodes = n, .nnz = e + n}, n, e);
  std::printf("bulk load: kept %.3g s, pipeline %.3g s (%s)\n", big.kept_s, big.pipeline_s,
              big.pipeline_plan.c_str());
  EXPECT_EQ(big.kept_s, big.rebuild_s);
  EXPECT_LT(big.pipeline_s, big.kept_s) << "the GPUs run the whole graph faster than the host CPU";
  EXPECT_NE(big.pipeline_plan, "none");

  pricer.detach();  // the engine gone: no pipeline, and nothing to price the kept work on
  const IncrementalCosts after = pricer.price(one_edge, {.nodes = 400, .nnz = 3000}, n, e);
  EXPECT_FALSE(after.pipeline_s < 1e30);
}

TEST(IncrementalChoice, SwitchesOnceTheOtherModeSavedARebuild) {
  IncrementalChoice c;
  const IncrementalCosts bulk{
      .kept_s = 0.030, .pipeline_s = 0.005, .rebuild_s = 0.030, .pipeline_plan = "1G"};
  const IncrementalCosts tiny{
      .kept_s = 0.0001, .pipeline_s = 0.002, .rebuild_s = 0.030, .pipeline_plan = "1C"};
  EXPECT_FALSE(c.observe(bulk));  // 25 ms saved so far: less than a rebuild
  EXPECT_EQ(c.mode(), AnswerMode::kept);
  EXPECT_TRUE(c.observe(bulk));  // 50 ms: past one rebuild
  EXPECT_EQ(c.mode(), AnswerMode::pipeline);
  int tiny_updates = 0;
  while (!c.observe(tiny)) ++tiny_updates;
  EXPECT_EQ(c.mode(), AnswerMode::kept);
  EXPECT_EQ(tiny_updates, 15) << "1.9 ms saved per update: the 16th passes one 30 ms rebuild";
  EXPECT_EQ(c.switches(), 2u);
  // Updates cheaper in the current mode take back what the other saved: one bulk load among
  // small updates does not flap the mode.
  EXPECT_FALSE(c.observe(bulk));
  for (int i = 0; i < 14; ++i) EXPECT_FALSE(c.observe(tiny));
  EXPECT_DOUBLE_EQ(c.excess_s(), 0.0);
  EXPECT_FALSE(c.observe(bulk));
  EXPECT_EQ(c.mode(), AnswerMode::kept);
}

TEST(IncrementalPricing,
     RegistryAnswersFromThePipelineAfterBulkLoadsAndKeptAgainAfterSmallUpdates) {
  const hw::System sys = testing::emu_system(2, 0, /*timing_only=*/true);
  const auto model = gcn_model(64);
  auto pricer = std::make_shared<IncrementalPricer>(
      model, std::make_shared<SchedPlanner>(*model, sys), perf_state());
  const std::int64_t n = 20000, f = 64;
  daemon::GraphRegistry reg;
  const std::string id = reg.add(random_graph(n, 100000, 5), {},
                                 make_tensor(n, f, kernels::generate_features(n, f, 2)));
  const std::vector<std::int64_t> ids = {5, 17, 19999};
  auto whole_rows = [&] {  // the whole graph's forward, rows ids
    const daemon::GraphRegistry::Stored s = reg.stored(id, *model, std::nullopt);
    return take_rows(reference_forward(*model, Request::gnn(s.graph, s.x)), ids);
  };
  ASSERT_TRUE(reg.answer_kept(id, "gcn", model, ids, std::nullopt, nullptr, pricer));
  EXPECT_GT(reg.activation_bytes(), 0u);

  std::mt19937_64 rng(3);
  auto edges = [&](int k) {
    GraphUpdate u;
    for (int i = 0; i < k; ++i) {
      u.add_src.push_back(static_cast<std::int64_t>(rng() % n));
      u.add_dst.push_back(static_cast<std::int64_t>(rng() % n));
    }
    return u;
  };
  // Bulk loads: each recomputes every layer on the host CPU; the GPUs run the graph faster.
  daemon::GraphUpdateResult r;
  for (int i = 0; i < 4 && (r.models.empty() || r.models[0].mode == AnswerMode::kept); ++i)
    r = reg.update(id, {}, edges(3000));
  ASSERT_EQ(r.models.size(), 1u);
  ASSERT_TRUE(r.models[0].costs);
  EXPECT_EQ(r.models[0].mode, AnswerMode::pipeline)
      << "kept " << r.models[0].costs->kept_s << " s, pipeline " << r.models[0].costs->pipeline_s
      << " s";
  EXPECT_FALSE(reg.answer_kept(id, "gcn", model, ids, std::nullopt, nullptr, pricer))
      << "answered by the engine now";
  EXPECT_EQ(reg.activation_bytes(), 0u) << "nothing kept while the pipeline answers";
  // What the engine is then given for those rows: their computation subgraph, exact.
  const daemon::GraphRegistry::Stored sub = reg.stored_rows(id, *model, std::nullopt, ids);
  EXPECT_LT(sub.graph->nodes, n);
  EXPECT_LT(relative_error(take_rows(reference_forward(*model, Request::gnn(sub.graph, sub.x)),
                                     sub.rows_wanted),
                           whole_rows()),
            1e-5);

  // Small updates: priced as what keeping would recompute (reach), far below the pipeline's
  // answer; once they saved a rebuild, the activations are kept again.
  int small = 0;
  for (; small < 20000 && r.models[0].mode == AnswerMode::pipeline; ++small)
    r = reg.update(id, {}, edges(1));
  EXPECT_EQ(r.models[0].mode, AnswerMode::kept) << "after " << small << " one-edge updates";
  std::printf(
      "back to kept after %d one-edge updates (kept %.3g s, pipeline %.3g s each, rebuild %.3g "
      "s)\n",
      small, r.models[0].costs->kept_s, r.models[0].costs->pipeline_s,
      r.models[0].costs->rebuild_s);
  const std::optional<HostTensor> kept =
      reg.answer_kept(id, "gcn", model, ids, std::nullopt, nullptr, pricer);
  ASSERT_TRUE(kept);
  EXPECT_LT(relative_error(*kept, whole_rows()), 1e-5);
  r = reg.update(id, {}, edges(1));
  EXPECT_EQ(r.models[0].mode, AnswerMode::kept);
  EXPECT_LT(relative_error(*reg.answer_kept(id, "gcn", model, ids, std::nullopt, nullptr, pricer),
                           whole_rows()),
            1e-5);
  EXPECT_NE(reg.metrics_text().find("dype_graph_answer_mode_switches_total 2"), std::string::npos);
}

TEST(IncrementalPricing, EngineReplansWhenAStreamDriftsFromWholeGraphsToUpdateAnswers) {
  // What the engine is given once a graph's answers come from the pipeline: each update's answer
  // rows as their computation subgraph. The DyPe planner sees those small graphs as such, so the
  // stream drifting from whole-graph requests to update answers re-plans, with the default drift
  // settings the daemon uses.
  const hw::System sys = testing::emu_system(2, 3, /*timing_only=*/true);
  const Model m = Model::gcn({.layers = 2,
                              .in_features = 128,
                              .hidden = 128,
                              .out_features = 16,
                              .materialize_weights = false});
  const std::int64_t n = 68471;
  const auto g = Graph::from_edges(random_graph(n, 500000, 9), /*gcn_norm=*/true);
  auto whole = [&] { return Request::gnn(g, HostTensor::shape_only(n, 128)); };
  auto answer = [&](std::int64_t node) {
    const std::vector<std::int64_t> ids = {node};
    const ComputationSubgraph s = computation_subgraph(*g, ids, 2);
    Request r = Request::gnn(s.graph, HostTensor::shape_only(s.graph->nodes, 128));
    r.set_rows_wanted(s.rows_wanted);
    return r;
  };
  EngineOptions o;
  o.replan_beside = false;  // decided at the request that detects it
  Engine e(m, std::make_shared<SchedPlanner>(m, sys), whole().characteristics(), o);
  const std::string whole_plan = e.current_label();
  for (int i = 0; i < 20; ++i) e.submit(whole());
  for (int i = 0; i < 60; ++i) e.submit(answer(i * 1000));
  e.drain();
  bool drifted = false;
  for (const ReplanRecord& r : e.replans())
    if (r.cause == "drift" && r.swapped) drifted = true;
  std::printf("whole graph: %s; update answers: %s (subgraph of one node: %lld nodes)\n",
              whole_plan.c_str(), e.current_label().c_str(),
              static_cast<long long>(answer(0).graph()->nodes));
  EXPECT_TRUE(drifted);
  EXPECT_NE(e.current_label(), whole_plan);
}

}  // namespace
}  // namespace dype::rt
