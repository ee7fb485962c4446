// Image-aware planning on the paper testbed (3 U280s with u280-sextans-swat loaded, the
// u280-sextans-gemm manifest beside it): the candidates and assignments, the reload cost, a change
// of image chosen when it pays for itself within the horizon and not otherwise, and the choice
// against a brute force over every assignment and plan. Modelled.
#include <gtest/gtest.h>

#include <cmath>

#include "hw/system_file.h"
#include "graph/generators.h"
#include "runtime/planning/image_choice.h"
#include "runtime/planning/schedule_inputs.h"
#include "scheduler/recurrent.h"

namespace dype::rt {
namespace {

const std::string kSystem = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
const std::string kGcn = std::string(DYPE_SOURCE_DIR) + "/configs/models/gcn.yaml";

sched::InputCharacteristics dataset(kernels::PaperDataset d) {
  const kernels::GraphShape s = kernels::paper_shape(d);
  return {.nodes = s.nodes, .nnz = s.edges, .feature_len = s.feature_len};
}

TEST(ImageChoice, CandidatesAndAssignments) {
  const FpgaImages images = candidate_images(hw::load_system_config(kSystem));
  ASSERT_EQ(images.options.size(), 2u);
  EXPECT_EQ(images.devices, 3);
  EXPECT_EQ(images.options[0].bitstream.name, "u280-sextans-swat");
  EXPECT_EQ(images.options[0].loaded, 3);
  EXPECT_EQ(images.options[1].bitstream.name, "u280-sextans-gemm");
  EXPECT_EQ(images.options[1].loaded, 0);
  const auto all = image_assignments(images);
  ASSERT_EQ(all.size(), 4u);  // 3 + 0, 2 + 1, 1 + 2, 0 + 3
  for (const auto& a : all) EXPECT_EQ(a[0] + a[1], 3);
  const ReloadCost none = reload_cost(images, {3, 0}), two = reload_cost(images, {1, 2});
  EXPECT_EQ(none.reloads, 0);
  EXPECT_EQ(none.pause_s, 0.0);
  EXPECT_EQ(two.reloads, 2);
  EXPECT_DOUBLE_EQ(two.pause_s, images.options[1].bitstream.load_time_s);  // in parallel
  EXPECT_DOUBLE_EQ(two.device_seconds, 2 * images.options[1].bitstream.load_time_s);
  EXPECT_EQ(describe(images, {1, 2}), "1 x u280-sextans-swat + 2 x u280-sextans-gemm");
}

struct Choice {
  ImageChoice choice;
  ImageAssignment assignment;
  sched::Plan loaded;  // the plan with the images as loaded
};

Choice choose(const sched::InputCharacteristics& in, sched::Objective o, double horizon) {
  const FpgaImages images = candidate_images(hw::load_system_config(kSystem));
  const auto all = image_assignments(images);
  const sched::ModelConfig cfg = sched::load_model_config(kGcn);
  std::vector<ScheduleInputs> systems;
  Choice out;
  for (const auto& a : all) {
    systems.push_back(a == ImageAssignment{3, 0} ? load_schedule_inputs(kSystem, cfg, in)
                                                 : load_schedule_inputs(kSystem, cfg, in, "", &images, &a));
  }
  const double p_exec = systems[0].system.kinds[static_cast<std::size_t>(systems[0].system.kind_index("fpga"))].power.exec_w;
  auto plan_for = [&](std::size_t i) {
    return sched::solve_shapes(systems[i].system, *systems[i].model, sched::recurrent_shapes(systems[i].workload),
                               {.objective = o});
  };
  out.choice = choose_images(images, all, plan_for, horizon, p_exec, o);
  out.assignment = all[out.choice.index];
  out.loaded = plan_for(0);
  return out;
}

// S2 on GCN: the GEMM image lets the FPGAs run the updates; worth 3 reloads (1.5 s) when the plan
// serves a million requests, not when it serves ten.
TEST(ImageChoice, AReloadIsChosenOnlyWhenItPaysWithinTheHorizon) {
  const auto in = dataset(kernels::PaperDataset::s2);
  const Choice longer = choose(in, sched::Objective::perf, 1e6);
  EXPECT_NE(longer.assignment, (ImageAssignment{3, 0})) << longer.choice.plan.mnemonic;
  EXPECT_GT(longer.choice.cost.reloads, 0);
  // It pays: the gain per request times the horizon exceeds the pause.
  const double gain = longer.loaded.period_s - longer.choice.plan.period_s;
  EXPECT_GT(gain * 1e6, longer.choice.cost.pause_s);
  std::printf("S2 GCN perf: loaded %s %.4g ms; chosen %s %.4g ms with %d reloads\n", longer.loaded.mnemonic.c_str(),
              longer.loaded.period_s * 1e3, longer.choice.plan.mnemonic.c_str(), longer.choice.plan.period_s * 1e3,
              longer.choice.cost.reloads);
  const Choice shorter = choose(in, sched::Objective::perf, 10);
  EXPECT_LT(gain * 10, longer.choice.cost.pause_s);  // ten requests do not repay the pause
  EXPECT_EQ(shorter.assignment, (ImageAssignment{3, 0}));
  EXPECT_EQ(shorter.choice.cost.reloads, 0);
  EXPECT_EQ(shorter.choice.plan.mnemonic, shorter.loaded.mnemonic);
}

// choose_images over exact solves equals the best amortised score over every assignment's every
// plan (flat and recurrent), for perf and energy.
TEST(ImageChoice, MatchesBruteForceOverAssignmentsAndPlans) {
  const FpgaImages images = candidate_images(hw::load_system_config(kSystem));
  const auto all = image_assignments(images);
  const sched::ModelConfig cfg = sched::load_model_config(kGcn);
  int checked = 0;
  for (auto d : {kernels::PaperDataset::s1, kernels::PaperDataset::s3, kernels::PaperDataset::ogbn_arxiv}) {
    const auto in = dataset(d);
    std::vector<ScheduleInputs> systems;
    for (const auto& a : all) systems.push_back(load_schedule_inputs(kSystem, cfg, in, "", &images, &a));
    const double p_exec = 74.5;
    for (double horizon : {1.0, 1e3, 1e6}) {
      for (auto o : {sched::Objective::perf, sched::Objective::energy}) {
        auto plan_for = [&](std::size_t i) {
          return sched::solve_shapes(systems[i].system, *systems[i].model, sched::recurrent_shapes(systems[i].workload),
                                     {.objective = o});
        };
        const ImageChoice got = choose_images(images, all, plan_for, horizon, p_exec, o);
        double want = sched::kInf;
        for (std::size_t i = 0; i < all.size(); ++i) {
          const auto shapes = sched::recurrent_shapes(systems[i].workload);
          const ReloadCost cost = reload_cost(images, all[i]);
          for (const auto& p : sched::enumerate_shape_plans(systems[i].system, *systems[i].model, shapes)) {
            sched::Plan plan;
            plan.period_s = p.plan.period_s;
            plan.energy_j = p.plan.energy_j;
            want = std::min(want, amortised_score(plan, cost, horizon, p_exec, o));
          }
        }
        EXPECT_NEAR(got.score, want, 1e-9 * want) << "horizon " << horizon << " " << sched::to_string(o);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 18);
}

}  // namespace
}  // namespace dype::rt
