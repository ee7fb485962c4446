// The scheduler on the paper's testbed configs (configs/systems/paper-testbed-*.yaml) with the
// emulated devices' models, through the same path as `dype-schedule` (rt::load_schedule_inputs):
// faster links never make the perf optimum worse; GCN on S1 (dense-ish, 600 features) and S4
// (very sparse, 20 features) get different plans, and the explanation says why; baselines are
// never better than the exact optimum. All figures are modelled.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/generators.h"
#include "runtime/planning/schedule_inputs.h"
#include "scheduler/baselines.h"
#include "scheduler/cost_tables.h"
#include "scheduler/solver.h"

namespace {

using namespace dype;
using sched::Objective;

const std::string kConfigs = std::string(DYPE_SOURCE_DIR) + "/configs/";
const std::vector<std::string> kLinks = {"paper-testbed-pcie4", "paper-testbed-pcie5", "paper-testbed-cxl3"};

sched::InputCharacteristics dataset(kernels::PaperDataset d) {
  const kernels::GraphShape s = kernels::paper_shape(d);
  return {.nodes = s.nodes, .nnz = s.edges, .feature_len = s.feature_len};
}

sched::Plan solve(const std::string& system, const std::string& model, const sched::InputCharacteristics& in,
                  Objective objective, bool explain = false) {
  const rt::ScheduleInputs inputs =
      rt::load_schedule_inputs(kConfigs + "systems/" + system + ".yaml", kConfigs + "models/" + model, in);
  const sched::CostTables tables(inputs.system, *inputs.model);
  sched::ObjectiveSpec o{.objective = objective};
  sched::Plan p = sched::solve(tables, o);
  if (explain) sched::explain(p, tables, o);
  return p;
}

TEST(SchedulePaperTestbed, FasterLinksNeverWorsenThePerfOptimum) {
  std::vector<std::pair<std::string, sched::InputCharacteristics>> cases;
  for (auto d : kernels::kAllPaperDatasets) {
    cases.emplace_back("gcn.yaml", dataset(d));
    cases.emplace_back("gin.yaml", dataset(d));
  }
  for (std::int64_t seq : {1024, 4096, 16384}) {
    for (std::int64_t w : {128, 512}) cases.push_back({"swin-transformer.yaml", {.seq_len = seq, .window = w}});
  }
  for (const auto& [model, in] : cases) {
    double previous = sched::kInf;
    for (const auto& system : kLinks) {
      const sched::Plan p = solve(system, model, in, Objective::perf);
      ASSERT_FALSE(p.empty()) << model << " on " << system;
      EXPECT_TRUE(sched::within(p.period_s, previous))
          << model << " nodes=" << in.nodes << " seq=" << in.seq_len << ": " << system << " period "
          << p.period_s << " s (" << p.mnemonic << ") is worse than the slower links' " << previous << " s";
      previous = p.period_s;
    }
  }
}

TEST(SchedulePaperTestbed, GcnPlansDifferBetweenS1AndS4AndTheExplanationSaysWhy) {
  for (Objective obj : {Objective::perf, Objective::balanced}) {
    const sched::Plan s1 = solve("paper-testbed-pcie4", "gcn.yaml", dataset(kernels::PaperDataset::s1), obj, true);
    const sched::Plan s4 = solve("paper-testbed-pcie4", "gcn.yaml", dataset(kernels::PaperDataset::s4), obj, true);
    EXPECT_NE(s1.mnemonic, s4.mnemonic) << sched::to_string(obj);
    for (const sched::Plan* p : {&s1, &s4}) {
      for (const sched::Stage& st : p->stages) {
        // Each stage names its choice and the runner-up with the runner-up's (worse) score.
        EXPECT_FALSE(st.why.empty()) << p->mnemonic;
        if (!st.runner_up.empty()) {
          EXPECT_NE(st.why.find(st.runner_up), std::string::npos) << st.why;
          EXPECT_GE(st.runner_up_score, p->score * (1 - 1e-9)) << st.why;
        }
      }
    }
  }
}

TEST(SchedulePaperTestbed, BaselinesFromTheSystemFileAreNeverBetterThanTheExactOptimum) {
  const auto in = dataset(kernels::PaperDataset::ogbn_arxiv);
  const rt::ScheduleInputs inputs = rt::load_schedule_inputs(kConfigs + "systems/paper-testbed-pcie4.yaml",
                                                             kConfigs + "models/gcn.yaml", in);
  // The file pins SpMM to the FPGAs and GEMM to the GPUs.
  EXPECT_EQ(inputs.system.op_kind[static_cast<std::size_t>(kernels::OpKind::spmm)],
            inputs.system.kind_index("fpga"));
  EXPECT_EQ(inputs.system.op_kind[static_cast<std::size_t>(kernels::OpKind::gemm)],
            inputs.system.kind_index("gpu"));
  for (Objective obj : {Objective::perf, Objective::energy}) {
    const sched::Plan best = sched::solve(inputs.system, *inputs.model, {.objective = obj});
    for (const std::string name : {"gpu-only", "fpga-only", "static", "fleetrec"}) {
      sched::Plan b;
      try {
        b = sched::baseline(name, inputs.system, *inputs.model, inputs.workload, {.objective = obj});
      } catch (const sched::InfeasibleError& e) {
        EXPECT_EQ(name, "fpga-only") << e.what();  // the FPGAs' bitstream has no GEMM
        continue;
      }
      ASSERT_FALSE(b.empty()) << name;
      if (obj == Objective::perf) {
        EXPECT_TRUE(sched::within(best.period_s, b.period_s)) << name << " " << b.mnemonic;
      } else {
        EXPECT_TRUE(sched::within(best.energy_j, b.energy_j)) << name << " " << b.mnemonic;
      }
    }
  }
}

TEST(SchedulePaperTestbed, MultiDeviceStagesPayTheAllGatherOnlyBeforeSpmm) {
  // Row-local kernels (GEMM) scale with the devices; an SpMM first all-gathers its dense input.
  const auto in = dataset(kernels::PaperDataset::s4);
  const rt::ScheduleInputs inputs = rt::load_schedule_inputs(kConfigs + "systems/paper-testbed-pcie4.yaml",
                                                             kConfigs + "models/gcn.yaml", in);
  const int gpu = inputs.system.kind_index("gpu");
  ASSERT_GE(gpu, 0);
  const auto& m = *inputs.model;
  const double gemm1 = m.compute_time_s(1, 1, {gpu, 1}), gemm2 = m.compute_time_s(1, 1, {gpu, 2});
  EXPECT_LT(gemm2, gemm1);
  EXPECT_NEAR(gemm2, gemm1 / (2 * 0.9), 1e-12 + 1e-9 * gemm1);
  const double spmm1 = m.compute_time_s(0, 0, {gpu, 1}), spmm2 = m.compute_time_s(0, 0, {gpu, 2});
  const double gather = inputs.workload.kernels[0].input_bytes / 2 / inputs.system.kinds[gpu].link_bw_bytes_per_s;
  EXPECT_NEAR(spmm2, spmm1 / (2 * 0.9) + gather, 1e-9 * spmm2);
}

TEST(SchedulePaperTestbed, BadSystemFileNamesTheKey) {
  try {
    rt::load_schedule_inputs(kConfigs + "models/gcn.yaml", kConfigs + "models/gcn.yaml",
                             dataset(kernels::PaperDataset::s1));
    FAIL() << "a model file is not a system file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gcn.yaml"), std::string::npos) << e.what();
  }
  try {
    rt::load_schedule_inputs(kConfigs + "systems/paper-testbed-pcie4.yaml", kConfigs + "models/gcn.yaml",
                             {.nodes = 100, .nnz = 1000});
    FAIL() << "GCN needs a feature length";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("feature"), std::string::npos) << e.what();
  }
}

}  // namespace
