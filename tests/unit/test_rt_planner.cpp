// The runtime planner: its cost model against what the pipeline really does on emulated devices,
// and the plans it picks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "runtime/planning/drift.h"
#include "runtime/pipeline.h"
#include "runtime/planning/planner.h"
#include "scheduler/cost_tables.h"
#include "scheduler/solver.h"
#include "test_rt_common.h"

namespace dype::rt {
namespace {

Request gnn_request(const Model& m, std::int64_t nodes, std::int64_t nnz) {
  return Request::gnn(Graph::shape_only(nodes, nnz), HostTensor::shape_only(nodes, m.spec().in_features));
}

Request transformer_request(const Model& m, std::int64_t seq_len, std::int64_t window) {
  return Request::transformer(HostTensor::shape_only(seq_len, m.spec().d_model), window);
}

// Every plan the scheduler can produce for `req`: the planner's predicted period vs the period the
// pipeline reaches on fresh timing-only emulated devices (both modelled). Each side of a hand-off
// is charged its own time (transfer_out_s / transfer_in_s), so the two agree within 5%; the
// prediction must never underestimate (beyond rounding): where the runtime may copy shard to
// shard through host memory (equal counts), both sides are charged the longer leg.
void expect_cost_model_matches_runtime(const Model& model, const Request& req, const std::string& bitstream,
                                       const std::string& transfers = "", int warmup = 4, int measured = 6) {
  hw::System sys = testing::emu_system(2, 3, true, bitstream, transfers);
  SchedPlanner planner(model, sys);
  const auto spec = planner.system_spec({});
  const auto cm = planner.cost_model(spec, req.characteristics());
  const sched::CostTables tables(spec, cm);
  const auto all = sched::enumerate_plans(tables);
  ASSERT_GT(all.size(), 5u);
  double best_runtime = sched::kInf, chosen_runtime = sched::kInf;
  const PlannedPipeline chosen = planner.plan(req.characteristics(), "perf", {});
  for (const auto& e : all) {
    const sched::Plan p = sched::evaluate(e.stages, tables);
    hw::System fresh = testing::emu_system(2, 3, true, bitstream, transfers);
    const double runtime = modelled_period_s(model, to_pipeline_spec(p, fresh, {}), req, warmup, measured);
    EXPECT_GT(runtime / p.period_s, 0.95) << p.mnemonic << " " << to_json(p).dump();
    EXPECT_LT(runtime / p.period_s, 1.02) << p.mnemonic << " " << to_json(p).dump();
    best_runtime = std::min(best_runtime, runtime);
    if (p.mnemonic == chosen.mnemonic && std::abs(p.period_s - chosen.period_s) <= 1e-12 * p.period_s)
      chosen_runtime = runtime;
  }
  // The plan the planner picks is (close to) the best one the runtime can run.
  ASSERT_LT(chosen_runtime, sched::kInf);
  EXPECT_LE(chosen_runtime, best_runtime * 1.10) << chosen.mnemonic;
}

TEST(RtPlanner, CostModelMatchesTheRuntimeOnEveryGcnPlan) {
  ModelSpec s;
  s.layers = 2;
  s.in_features = 64;
  s.hidden = 64;
  s.materialize_weights = false;
  const Model m = Model::gcn(s);
  // Host transfers dominate (big, sparse) and compute dominates (dense): both regimes.
  expect_cost_model_matches_runtime(m, gnn_request(m, 1'000'000, 3'000'000), "u280-sextans-gemm.yaml");
  expect_cost_model_matches_runtime(m, gnn_request(m, 100'000, 40'000'000), "u280-sextans-gemm.yaml");
}

// Copies beside the kernels on per-direction engines (transfers: overlap): the same agreement,
// over more requests (the engines' gaps take a few requests to settle).
TEST(RtPlanner, OverlapCostModelMatchesTheRuntimeOnEveryPlan) {
  ModelSpec s;
  s.layers = 2;
  s.in_features = 64;
  s.hidden = 64;
  s.materialize_weights = false;
  const Model gcn = Model::gcn(s);
  expect_cost_model_matches_runtime(gcn, gnn_request(gcn, 1'000'000, 3'000'000), "u280-sextans-gemm.yaml", "overlap", 8, 32);
  expect_cost_model_matches_runtime(gcn, gnn_request(gcn, 100'000, 40'000'000), "u280-sextans-gemm.yaml", "overlap", 8, 32);
  ModelSpec t;
  t.layers = 1;
  t.d_model = 256;
  t.heads = 4;
  t.ffn = 512;
  t.materialize_weights = false;
  const Model tf = Model::transformer(t);
  expect_cost_model_matches_runtime(tf, transformer_request(tf, 8192, 256), "u280-sextans-swat.yaml", "overlap", 8, 32);
}

TEST(RtPlanner, CostModelMatchesTheRuntimeOnEveryTransformerPlan) {
  ModelSpec s;
  s.layers = 1;
  s.d_model = 256;
  s.heads = 4;
  s.ffn = 512;
  s.materialize_weights = false;
  const Model m = Model::transformer(s);
  expect_cost_model_matches_runtime(m, transformer_request(m, 8192, 256), "u280-sextans-swat.yaml");
}

TEST(RtPlanner, CostModelMatchesTheRuntimeOnEveryEncoderPlan) {
  // nn.TransformerEncoderLayer's block: LayerNorm kernels, and the skip tensor carried beside the
  // activations across stage boundaries (its transfers must be costed as the runtime moves them).
  for (const bool pre : {false, true}) {
    ModelSpec s;
    s.layers = 1;
    s.d_model = 256;
    s.heads = 4;
    s.ffn = 512;
    s.residual_norm = true;
    s.norm_first = pre;
    s.materialize_weights = false;
    const Model m = Model::transformer(s);
    expect_cost_model_matches_runtime(m, transformer_request(m, 8192, 256), "u280-sextans-swat.yaml");
  }
}

TEST(RtPlanner, AKernelNoDeviceRunsIsNamedWithWhy) {
  ModelSpec s;
  s.layers = 1;
  s.in_features = 16;
  s.hidden = 8;
  s.materialize_weights = false;
  const Model m = Model::gcn(s);
  hw::System sys = testing::emu_system(0, 2, true, "u280-sextans-swat.yaml");  // FPGAs without a GEMM; CPU not schedulable
  SchedPlanner planner(m, sys);
  try {
    planner.plan(gnn_request(m, 1000, 5000).characteristics(), "perf", {});
    FAIL() << "planned a GEMM nobody runs";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "kernel 'l0.update' (gemm) has no device to run on (cpu0: not schedulable; fpga0: bitstream "
                           "'u280-sextans-swat' has no gemm; fpga1: bitstream 'u280-sextans-swat' has no gemm)");
  }
}

TEST(RtPlanner, HostTransfersCountInTheFirstAndLastStage) {
  // The same GCN on one GPU: the request's features go up and its output comes back over PCIe,
  // which the runtime charges to the pipeline's end stages; the planner must too. Serial: the
  // stage holds both legs; overlap: each leg on its own engine, the period at least the longer.
  ModelSpec s;
  s.layers = 1;
  s.in_features = 128;
  s.hidden = 128;
  s.materialize_weights = false;
  const Model m = Model::gcn(s);
  const Request req = gnn_request(m, 2'000'000, 4'000'000);
  const double bytes_in = 4.0 * 2e6 * 128, bytes_out = bytes_in;
  for (const std::string transfers : {"serial", "overlap"}) {
    hw::System sys = testing::emu_system(1, 0, true, "u280-sextans-gemm.yaml", transfers);
    SchedPlanner planner(m, sys);
    const PlannedPipeline p = planner.plan(req.characteristics(), "perf", {});
    ASSERT_EQ(p.mnemonic, "1G");
    const auto& gpu = sys.device("gpu0");
    const double pcie = sys.topology().device(gpu.topology_index()).link.bandwidth_bytes_per_s();
    EXPECT_GT(p.period_s, transfers == "serial" ? (bytes_in + bytes_out) / pcie : std::max(bytes_in, bytes_out) / pcie)
        << transfers;
    hw::System fresh = testing::emu_system(1, 0, true, "u280-sextans-gemm.yaml", transfers);
    const double runtime = modelled_period_s(m, PipelineSpec{{{0, 1, {&fresh.device("gpu0")}, 0.0}}, "1G"}, req, 2, 6);
    EXPECT_NEAR(runtime / p.period_s, 1.0, 0.02) << transfers;
  }
  hw::System sys = testing::emu_system(1, 0, true, "u280-sextans-gemm.yaml", "serial");
  SchedPlanner planner(m, sys);
  const double pcie = sys.topology().device(sys.device("gpu0").topology_index()).link.bandwidth_bytes_per_s();
  // The dumped tables show the two legs apart (they are inside the 1-range's compute).
  const auto spec = planner.system_spec({});
  const auto cm = planner.cost_model(spec, req.characteristics());
  const nlohmann::json dump = sched::CostTables(spec, cm).to_json();
  ASSERT_EQ(dump["host_io"].size(), 1u);
  const double in = dump["host_io"][0]["input_s"].get<double>(), out = dump["host_io"][0]["output_s"].get<double>();
  EXPECT_NEAR(in, bytes_in / pcie, 0.05 * in);
  EXPECT_NEAR(out, bytes_out / pcie, 0.05 * out);
  EXPECT_GT(cm.compute_time_s(0, 1, {0, 1}), in + out);
}

TEST(RtDrift, StageSamplesFromBeforeARebaseAreIgnored) {
  // After a swap, requests of the old plan still complete; their measured/predicted ratios (old
  // plan, old characteristics) must not become the new plan's baseline, or the new plan's first
  // normal samples look like drift.
  DriftOptions o;
  o.window = 4;
  o.sustain = 2;
  o.min_requests_between = 0;
  DriftDetector d(o, {.nodes = 10});
  d.rebase({.nodes = 20}, 100);
  for (std::uint64_t i = 90; i < 100; ++i) d.observe_stage_time(0, 1.0, 6.0, i);  // old plan's requests
  for (std::uint64_t i = 100; i < 110; ++i) d.observe_stage_time(0, 1.0, 1.0, i);
  EXPECT_FALSE(d.observe({.nodes = 20}, 110));
  // Without the index every sample counts: the stale ratios set the baseline and 1.0 is drift.
  DriftDetector stale(o, {.nodes = 10});
  stale.rebase({.nodes = 20}, 100);
  for (int i = 0; i < 4; ++i) stale.observe_stage_time(0, 1.0, 6.0);
  for (int i = 0; i < 4; ++i) stale.observe_stage_time(0, 1.0, 1.0);
  EXPECT_TRUE(stale.observe({.nodes = 20}, 110));
}

}  // namespace
}  // namespace dype::rt
