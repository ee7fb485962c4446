// dype-schedule and dype-serve plan with one cost model: for every paper Table I dataset (GCN and
// GIN configs), three transformer inputs, the three paper testbeds and the perf, energy and
// balanced modes, the plan dype-schedule's inputs give (rt::load_schedule_inputs with the runtime
// cost model, the configs/models files, the fitted models in configs/perfmodels) is the plan the
// daemon's planner makes (a PerfModelPlanner on the same system file and fitted models, for a
// request with those characteristics), with the same predicted period and energy. Modelled.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "hw/system_file.h"
#include "graph/generators.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/schedule_inputs.h"
#include "runtime/planning/schedule_runtime.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"

namespace {

using namespace dype;

const std::string kConfigs = std::string(DYPE_SOURCE_DIR) + "/configs/";

struct Case {
  std::string model;
  sched::InputCharacteristics in;
  std::string name;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* model : {"gcn.yaml", "gin.yaml"}) {
    for (auto d : kernels::kAllPaperDatasets) {
      const kernels::GraphShape s = kernels::paper_shape(d);
      out.push_back({model, {.nodes = s.nodes, .nnz = s.edges, .feature_len = s.feature_len},
                     std::string(model) + " " + std::string(kernels::to_string(d))});
    }
  }
  for (const auto& [seq, w] : {std::pair{1024, 128}, {4096, 512}, {16384, 4096}})
    out.push_back({"swin-transformer.yaml", {.seq_len = seq, .window = w},
                   "transformer seq " + std::to_string(seq) + " window " + std::to_string(w)});
  return out;
}

TEST(OneCostModel, DypeScheduleAndTheDaemonChooseTheSamePlan) {
  const std::string perfmodels = kConfigs + "perfmodels";
  int compared = 0, recurrent = 0;
  for (const char* testbed : {"paper-testbed-pcie4", "paper-testbed-pcie5", "paper-testbed-cxl3"}) {
    const std::string system_file = kConfigs + "systems/" + testbed + ".yaml";
    for (const Case& c : cases()) {
      const sched::ModelConfig config = sched::load_model_config(kConfigs + "models/" + c.model);
      // dype-schedule's side.
      const rt::ScheduleInputs si = rt::load_schedule_inputs(system_file, config, c.in, perfmodels, nullptr, nullptr,
                                                             rt::CostModelChoice::runtime);
      ASSERT_NE(si.cost_source.find("runtime's cost model"), std::string::npos) << si.cost_source;
      // The daemon's side: its own system, model and planner, as EngineService builds them.
      const auto spec = rt::runtime_model_spec(config, c.in);
      ASSERT_TRUE(spec.has_value()) << c.name;
      const hw::System system = hw::System::from_config(hw::load_system_config(system_file));
      const rt::Model model = rt::Model::make(*spec);
      rt::PerfModelPlanner daemon(model, system, rt::PerfModelPlanner::stores_for(system, perfmodels));
      for (const char* mode : {"perf", "energy", "balanced"}) {
        sched::ObjectiveSpec obj;
        obj.objective = sched::objective_from_string(mode);
        const sched::Plan a = sched::solve_shapes(si.system, *si.model, sched::recurrent_shapes(si.workload), obj);
        const rt::PlannedPipeline b = daemon.plan(c.in, mode, {});
        const std::string where = std::string(testbed) + " " + c.name + " " + mode;
        EXPECT_EQ(a.mnemonic, b.mnemonic) << where;
        EXPECT_NEAR(a.period_s, b.period_s, 1e-9 * a.period_s) << where;
        EXPECT_NEAR(a.energy_j, b.energy_j, 1e-9 * a.energy_j) << where;
        ++compared;
        recurrent += a.rounds > 1;
      }
    }
  }
  std::printf("dype-schedule and the daemon agreed on %d plans (%d layer-recurrent)\n", compared, recurrent);
  EXPECT_EQ(compared, 3 * 15 * 3);
}

TEST(OneCostModel, ConfigsTheRuntimeDoesNotRunFallBackToTheAdditiveModelAndSaySo) {
  sched::ModelConfig config = sched::load_model_config(kConfigs + "models/gcn.yaml");
  config.layer.push_back({.name = "again", .op = kernels::OpKind::spmm});  // spmm, gemm, spmm: no runtime family
  const sched::InputCharacteristics in{.nodes = 1000, .nnz = 5000, .feature_len = 16};
  EXPECT_FALSE(rt::runtime_model_spec(config, in).has_value());
  const rt::ScheduleInputs si = rt::load_schedule_inputs(kConfigs + "systems/paper-testbed-pcie4.yaml", config, in, "",
                                                         nullptr, nullptr, rt::CostModelChoice::runtime);
  EXPECT_NE(si.cost_source.find("the additive model"), std::string::npos) << si.cost_source;
  EXPECT_EQ(si.runtime, nullptr);
}

}  // namespace
