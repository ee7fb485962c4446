// The runtime planner on fitted performance models: which source each kernel time comes from, and
// online refinement (a deliberately wrong model is corrected from the kernel times the pipeline
// reports, and the plan is re-checked and swapped).
#include <gtest/gtest.h>

#include "hw/emu/emu_device.h"
#include "perfmodel/profiler.h"
#include "runtime/engine.h"
#include "runtime/planning/perf_planner.h"
#include "test_rt_common.h"

namespace dype::rt {
namespace {

using kernels::OpKind;

Model gcn() {
  ModelSpec s;
  s.layers = 2;
  s.in_features = 64;
  s.hidden = 64;
  s.materialize_weights = false;
  return Model::gcn(s);
}

Request request(const Model& m) {
  return Request::gnn(Graph::shape_only(50'000, 15'000'000), HostTensor::shape_only(50'000, m.spec().in_features));
}

// Fitted models of the emulated MI210 and U280 (timing-only, so profiling is quick): the
// profiler times synthetic shapes through Device::launch and fits, as dype-profile does.
std::vector<perf::ModelStore> profile(hw::System& sys, bool with_fpga) {
  perf::ProfileOptions o;
  o.kernels = {OpKind::spmm, OpKind::gemm};
  o.max_points = 40;
  o.budget_s = 30;
  std::vector<perf::ModelStore> out;
  out.push_back(perf::profile_device(sys.device("gpu0"), "amd-mi210", o));
  if (with_fpga) out.push_back(perf::profile_device(sys.device("fpga0"), "xilinx-u280", o));
  for (hw::Device* d : sys.devices())
    if (auto* e = dynamic_cast<hw::EmuDevice*>(d)) e->reset_clock();
  return out;
}

const std::vector<perf::ModelStore>& fitted_stores() {
  static const std::vector<perf::ModelStore> stores = [] {
    hw::System sys = testing::emu_system(1, 1, true);
    return profile(sys, true);
  }();
  return stores;
}

TEST(RtPerfPlanner, FittedModelsPlanLikeTheDevicesAndSayWhere) {
  const Model m = gcn();
  hw::System sys = testing::emu_system(2, 3, true);
  SchedPlanner truth(m, sys);
  PerfModelPlanner fitted(m, sys, fitted_stores());
  const Characteristics c = request(m).characteristics();
  const PlannedPipeline a = truth.plan(c, "perf", {});
  const PlannedPipeline b = fitted.plan(c, "perf", {});
  // The fitted plan, costed on the ground truth, is close to the true optimum.
  EXPECT_LE(truth.predict_period_s(b.spec, c), 1.10 * a.period_s) << a.mnemonic << " vs " << b.mnemonic;
  EXPECT_NE(b.cost_source.find("amd-mi210: fitted perf model (spmm,gemm)"), std::string::npos) << b.cost_source;
  EXPECT_NE(a.cost_source.find("device models"), std::string::npos) << a.cost_source;

  // No store for the FPGA: its kernels fall back to the device model, and the record says so.
  PerfModelPlanner gpu_only(m, sys, {fitted_stores()[0]});
  const PlannedPipeline g = gpu_only.plan(c, "perf", {});
  EXPECT_NE(g.cost_source.find("xilinx-u280: device model (spmm,gemm)"), std::string::npos) << g.cost_source;
  const kernels::OpShape shape = m.kernel_shapes(c)[0];
  EXPECT_DOUBLE_EQ(gpu_only.kernel_time_s(sys.device("fpga0"), shape), modelled_kernel_time_s(sys, sys.device("fpga0"), shape));
}

TEST(RtPerfPlanner, WrongModelIsRefinedOnlineAndThePlanRechecked) {
  const Model m = gcn();
  hw::System sys = testing::emu_system(2, 3, true);
  const Request req = request(m);
  const Characteristics c = req.characteristics();
  SchedPlanner truth(m, sys);
  const PlannedPipeline best = truth.plan(c, "perf", {});

  // The FPGA's SpMM model claims 5x the speed it has.
  auto stores = fitted_stores();
  for (auto& s : stores)
    if (s.device_model == "xilinx-u280")
      for (double& k : s.at(OpKind::spmm).coefficients) k *= 0.2;
  auto planner = std::make_shared<PerfModelPlanner>(m, sys, stores);
  const PlannedPipeline wrong = planner->plan(c, "perf", {});
  ASSERT_GT(truth.predict_period_s(wrong.spec, c), 1.15 * best.period_s)
      << "the wrong model must lead to a worse plan: " << wrong.mnemonic << " (" << describe(wrong.spec) << ") vs "
      << best.mnemonic << " (" << describe(best.spec) << ", " << best.period_s << " s)";
  const kernels::OpShape spmm = m.kernel_shapes(c)[0];
  const double true_s = modelled_kernel_time_s(sys, sys.device("fpga0"), spmm);
  EXPECT_LT(planner->kernel_time_s(sys.device("fpga0"), spmm), 0.4 * true_s);

  EngineOptions o;
  o.drift.enabled = false;  // only the model refinement may re-plan here
  o.observers.push_back(planner);
  Engine e(m, planner, c, o);
  ASSERT_EQ(e.current_label(), wrong.mnemonic);
  for (int i = 0; i < 120; ++i) e.submit(req);
  e.drain();

  // One outlier-gated run of same-sign residuals is accepted as a regime change, then refined.
  const auto n = planner->counters();
  EXPECT_GT(n.accepted, 0u);
  EXPECT_GE(n.rechecks, 1u);
  EXPECT_NEAR(planner->kernel_time_s(sys.device("fpga0"), spmm) / true_s, 1.0, 0.3);
  // The FPGA SpMM correction triggers a re-check that swaps away from the wrong plan (other
  // models' small corrections may re-check too; they swap only when a plan wins by the margin).
  bool swapped_on_fpga_spmm = false;
  for (const auto& r : e.replans()) {
    if (r.cause != "model") continue;
    EXPECT_NE(r.detail.find("model refined from modelled device kernel times"), std::string::npos) << r.detail;
    EXPECT_NE(r.cost_source.find("fitted perf model"), std::string::npos) << r.cost_source;
    if (r.swapped && r.detail.find("xilinx-u280 spmm") != std::string::npos && r.old_plan == wrong.mnemonic)
      swapped_on_fpga_spmm = true;
  }
  EXPECT_TRUE(swapped_on_fpga_spmm);
  // The plan now in use is (close to) the best one on the devices' real behaviour.
  EXPECT_LE(truth.predict_period_s(e.current_spec(), c), 1.10 * best.period_s) << e.current_label();
  EXPECT_EQ(e.stats().completed, 120u);
}

TEST(RtPerfPlanner, OneSlowLaunchDoesNotMoveTheModel) {
  const Model m = gcn();
  hw::System sys = testing::emu_system(2, 3, true);
  PerfModelPlanner planner(m, sys, fitted_stores());
  const kernels::OpShape spmm = m.kernel_shapes(request(m).characteristics())[0];
  const double before = planner.kernel_time_s(sys.device("gpu0"), spmm);
  StageEvent ev;
  ev.kernels.push_back({0, "gpu0", spmm, 20.0 * before, true});
  planner.on_stage(ev);
  EXPECT_DOUBLE_EQ(planner.kernel_time_s(sys.device("gpu0"), spmm), before);
  EXPECT_EQ(planner.counters().rejected, 1u);
  EXPECT_FALSE(planner.take_recheck());
}

// A refined prediction must stay moved for recheck_sustain launches of the kernel in a row before
// the plan is re-checked; a launch within the threshold starts the count again.
TEST(RtPerfPlanner, RecheckNeedsASustainedMove) {
  const Model m = gcn();
  hw::System sys = testing::emu_system(2, 3, true);
  PerfPlannerOptions po;
  po.recheck_sustain = 3;
  PerfModelPlanner planner(m, sys, fitted_stores(), po);
  const Characteristics c = request(m).characteristics();
  planner.plan(c, "perf", {});
  const kernels::OpShape spmm = m.kernel_shapes(c)[0];
  const double fitted = planner.kernel_time_s(sys.device("gpu0"), spmm);
  auto launch = [&](double seconds) {
    StageEvent ev;
    ev.kernels.push_back({0, "gpu0", spmm, seconds, true});
    planner.on_stage(ev);
  };
  // The device really is 2x slower: gated launches until the run of same-sign residuals is taken
  // as a regime change, after which the prediction has moved well past the 20% threshold.
  int launches = 0;
  while (std::fabs(planner.kernel_time_s(sys.device("gpu0"), spmm) / fitted - 1.0) <= po.recheck_threshold) {
    launch(2.0 * fitted);
    ASSERT_LT(++launches, 20) << "the refinement never accepted the shift";
  }
  EXPECT_FALSE(planner.take_recheck()) << "one moved launch is not yet a sustained move";
  launch(2.0 * fitted);
  EXPECT_FALSE(planner.take_recheck());
  launch(2.0 * fitted);
  const auto r = planner.take_recheck();
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("amd-mi210 spmm model refined"), std::string::npos) << *r;
  EXPECT_EQ(planner.counters().rechecks, 1u);
  // A new plan is made with the refined model: nothing has moved since, so no re-check.
  planner.plan(c, "perf", {});
  for (int i = 0; i < 5; ++i) launch(2.0 * fitted);
  EXPECT_FALSE(planner.take_recheck());
}

}  // namespace
}  // namespace dype::rt
