// FPGAs holding different images on one system: the runtime plans them as one kind per image, runs
// plans that use both kinds correctly, and its "what if these images were loaded" plans (image
// choice, timed from the manifests) are the plans it makes once the images are really loaded.
#include <gtest/gtest.h>

#include <set>

#include "hw/device_profile.h"
#include "runtime/planning/image_planner.h"
#include "runtime/planning/planner.h"
#include "runtime/planning/planning_kinds.h"
#include "scheduler/cost_tables.h"
#include "scheduler/recurrent.h"
#include "test_rt_common.h"
#include "../test_rt_requests.h"

namespace dype::rt {
namespace {

using testing::expect_pipeline_matches_reference;

hw::Bitstream manifest(const std::string& file) { return hw::load_bitstream(testing::configs_dir() + "/bitstreams/" + file); }

std::vector<std::string> kind_names(const std::vector<PlanningKind>& kinds) {
  std::vector<std::string> out;
  for (const auto& k : kinds) out.push_back(k.name + " x" + std::to_string(k.devices.size()));
  return out;
}

TEST(RtImages, FpgasWithDifferentImagesArePlannedAsOneKindPerImage) {
  auto sys = testing::emu_system(2, 3, false, "u280-sextans-swat.yaml");
  EXPECT_EQ(kind_names(planning_kinds(sys, {})), (std::vector<std::string>{"gpu x2", "fpga x3"}));
  const hw::Bitstream gemm = manifest("u280-sextans-gemm.yaml");
  sys.find("fpga1")->load_bitstream(gemm);
  EXPECT_EQ(kind_names(planning_kinds(sys, {})),
            (std::vector<std::string>{"gpu x2", "fpga:u280-sextans-gemm x1", "fpga:u280-sextans-swat x2"}));
  // A drain changes the counts, not the names (a pipeline keeps its kinds across drains).
  EXPECT_EQ(kind_names(planning_kinds(sys, {"fpga1"})), (std::vector<std::string>{"gpu x2", "fpga:u280-sextans-swat x2"}));
  EXPECT_EQ(planning_kind_name(sys, *sys.find("fpga0")), "fpga:u280-sextans-swat");
  // What-if: every FPGA with the GEMM image is one kind again, timed from the manifest.
  const FpgaImagePlan all_gemm{{"fpga0", &gemm}, {"fpga1", &gemm}, {"fpga2", &gemm}};
  const auto kinds = planning_kinds(sys, {}, &all_gemm);
  ASSERT_EQ(kind_names(kinds), (std::vector<std::string>{"gpu x2", "fpga x3"}));
  EXPECT_NE(kinds[1].manifest, nullptr);  // timed from the manifest (fpga0, its first, holds SWAT)
  const auto spec = scheduler_system_spec(sys, {});
  ASSERT_EQ(spec.kinds.size(), 3u);
  EXPECT_EQ(spec.kinds[1].letter, 'F');
  EXPECT_EQ(spec.kinds[2].count, 2);
}

// Every recurrent plan of a reduced transformer that puts stages on both FPGA kinds (GEMMs on the
// GEMM image, attention on the SWAT image) answers as the CPU reference does, on the devices
// to_pipeline_spec gives each kind.
TEST(RtImages, PlansOverMixedImagesRunOnTheRightFpgasAndMatchTheReference) {
  auto sys = testing::emu_system(2, 3, false, "u280-sextans-swat.yaml");
  sys.find("fpga0")->load_bitstream(manifest("u280-sextans-gemm.yaml"));
  Model m = Model::transformer({.layers = 2, .d_model = 16, .heads = 2, .ffn = 24, .seed = 41});
  const auto reqs = testing::tf_requests(m, 40, 8, 2);
  SchedPlanner planner(m, sys);
  const sched::SystemSpec spec = planner.system_spec({});
  const RuntimeCostModel cost = planner.cost_model(spec, reqs[0].characteristics());
  const int gemm_kind = spec.kind_index("fpga:u280-sextans-gemm"), swat_kind = spec.kind_index("fpga:u280-sextans-swat");
  ASSERT_GE(gemm_kind, 0);
  ASSERT_GE(swat_kind, 0);
  const sched::CostTables tables(spec, cost);
  int ran = 0;
  for (const auto& p : sched::enumerate_shape_plans(spec, cost, recurrent_shapes(m))) {
    bool gemm = false, swat = false;
    for (const auto& st : p.plan.stages) {
      gemm |= tables.group(st.kc).kind == gemm_kind;
      swat |= tables.group(st.kc).kind == swat_kind;
    }
    if (!gemm || !swat) continue;
    const sched::Plan plan = p.shape.rounds > 1 ? sched::evaluate_recurrent(p.plan.stages, spec, cost, p.shape)
                                                : sched::evaluate(p.plan.stages, tables);
    const PipelineSpec ps = to_pipeline_spec(plan, sys, {});
    for (const PipelineStage& st : ps.stages)
      for (const hw::Device* d : st.devices)
        for (int k = st.first; k <= st.last; ++k)
          ASSERT_TRUE(d->supports(m.step(k).op)) << plan.mnemonic << ": " << d->name() << " cannot run " << m.step(k).name;
    expect_pipeline_matches_reference(m, ps, reqs, plan.mnemonic + " = " + describe(ps), 1e-5);
    if (++ran == 40) break;
  }
  std::printf("mixed images: %d plans using both FPGA kinds checked\n", ran);
  EXPECT_GE(ran, 10);
}

// The plan image choice predicts for an assignment (FPGAs timed from the manifests) is the plan the
// planner makes once those images are loaded, for every assignment and objective.
TEST(RtImages, WhatIfPlansAreThePlansMadeOnceTheImagesAreLoaded) {
  for (const bool gnn : {true, false}) {
    auto sys = testing::emu_system(2, 3, false, "u280-sextans-swat.yaml");
    Model m = gnn ? Model::gcn({.layers = 2, .in_features = 64, .hidden = 64, .seed = 3})
                  : Model::transformer({.layers = 4, .d_model = 64, .heads = 2, .ffn = 128, .seed = 4});
    const Characteristics c = gnn ? Characteristics{.nodes = 200000, .nnz = 4000000, .feature_len = 64}
                                  : Characteristics{.feature_len = 64, .seq_len = 8192, .window = 1024};
    SchedPlanner planner(m, sys);
    const FpgaImages images = candidate_images(sys, {});
    ASSERT_EQ(images.options.size(), 2u);
    EXPECT_EQ(images.options[0].bitstream.name, "u280-sextans-swat");
    EXPECT_EQ(images.options[0].loaded, 3);
    const auto assignments = image_assignments(images);
    ASSERT_EQ(assignments.size(), 4u);
    for (const auto& a : assignments) {
      const FpgaImagePlan map = assign_images(sys, {}, images, a);
      std::vector<std::pair<hw::Device*, hw::Bitstream>> undo;
      for (const auto& mode : {"perf", "energy"}) {
        sched::ObjectiveSpec obj;
        obj.objective = sched::objective_from_string(mode);
        sched::Plan what_if;
        try {
          what_if = planner.solve(c, obj, {}, &map);
        } catch (const sched::InfeasibleError&) {
        }
        // Load the assignment for real, plan, put the SWAT image back.
        for (const auto& [name, image] : map) sys.find(name)->load_bitstream(*image);
        sched::Plan real;
        try {
          real = planner.solve(c, obj, {});
        } catch (const sched::InfeasibleError&) {
        }
        for (const auto& [name, image] : map) sys.find(name)->load_bitstream(images.options[0].bitstream);
        const std::string where = std::string(gnn ? "GCN" : "transformer") + " " + describe(images, a) + " " + mode;
        ASSERT_EQ(what_if.empty(), real.empty()) << where;
        if (real.empty()) continue;
        EXPECT_EQ(what_if.mnemonic, real.mnemonic) << where;
        EXPECT_NEAR(what_if.period_s, real.period_s, 1e-9 * real.period_s) << where;
        EXPECT_NEAR(what_if.energy_j, real.energy_j, 1e-9 * real.energy_j) << where;
      }
    }
  }
}

TEST(RtImages, AssignmentsKeepTheImagesFpgasHold) {
  auto sys = testing::emu_system(1, 3, false, "u280-sextans-swat.yaml");
  sys.find("fpga1")->load_bitstream(manifest("u280-sextans-gemm.yaml"));
  const FpgaImages images = candidate_images(sys, {});
  ASSERT_EQ(images.options.size(), 2u);
  // Loaded images first, in the order the FPGAs hold them.
  EXPECT_EQ(images.options[0].bitstream.name, "u280-sextans-swat");
  EXPECT_EQ(images.options[0].loaded, 2);
  EXPECT_EQ(images.options[1].loaded, 1);
  // 1 x SWAT + 2 x GEMM: fpga1 keeps GEMM, fpga0 keeps SWAT, fpga2 is the one reloaded.
  const FpgaImagePlan map = assign_images(sys, {}, images, {1, 2});
  EXPECT_EQ(map.at("fpga0")->name, "u280-sextans-swat");
  EXPECT_EQ(map.at("fpga1")->name, "u280-sextans-gemm");
  EXPECT_EQ(map.at("fpga2")->name, "u280-sextans-gemm");
  EXPECT_EQ(reload_cost(images, {1, 2}).reloads, 1);
  // A drained FPGA is not assigned (it keeps its image).
  const FpgaImages without = candidate_images(sys, {"fpga2"});
  EXPECT_EQ(without.devices, 2);
  EXPECT_EQ(assign_images(sys, {"fpga2"}, without, {0, 2}).count("fpga2"), 0u);
}

// plan_images takes the best amortised score over the assignments: a long horizon pays for a
// reload that a short one does not.
TEST(RtImages, PlanImagesReloadsOnlyWhenItPaysWithinTheHorizon) {
  auto sys = testing::emu_system(2, 3, false, "u280-sextans-swat.yaml");
  Model m = Model::gcn({.layers = 2, .in_features = 64, .hidden = 64, .seed = 3});
  const Characteristics c{.nodes = 200000, .nnz = 4000000, .feature_len = 64};
  SchedPlanner planner(m, sys);
  const FpgaImages images = candidate_images(sys, {});
  const ImagePlan keep = plan_images(planner, c, "energy", {}, images, 1.0);
  const ImagePlan reload = plan_images(planner, c, "energy", {}, images, 1e9);
  std::printf("GCN energy: horizon 1 -> %s (%s, %.4g J); horizon 1e9 -> %s (%s, %.4g J, %d reloads)\n",
              keep.images.c_str(), keep.plan.mnemonic.c_str(), keep.plan.energy_j, reload.images.c_str(),
              reload.plan.mnemonic.c_str(), reload.plan.energy_j, reload.cost.reloads);
  EXPECT_TRUE(keep.reloads.empty());
  EXPECT_EQ(keep.images, "3 x u280-sextans-swat");
  ASSERT_FALSE(reload.reloads.empty());
  EXPECT_LT(reload.plan.energy_j, keep.plan.energy_j);
  // The proposal's pipeline uses only FPGAs that will hold what its stages need.
  for (const PipelineStage& st : reload.planned.spec.stages)
    for (const hw::Device* d : st.devices)
      if (d->kind() == hw::DeviceKind::fpga) {
        const hw::Bitstream* b = reload.by_device.at(d->name());
        for (int k = st.first; k <= st.last; ++k) EXPECT_NE(b->find(m.step(k).op), nullptr) << d->name();
      }
}

}  // namespace
}  // namespace dype::rt
