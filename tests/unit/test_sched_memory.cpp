// The memory-capacity constraint: what one device of a stage holds (cost_model.h's Footprint)
// must fit its memory. A plan that would not fit is never produced; the solver stays exact with
// ranges ruled out (brute force); infeasibility names the shortfall.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "scheduler/recurrent.h"
#include "scheduler/solver.h"

namespace dype::sched {
namespace {

Workload gcn(std::int64_t nodes, std::int64_t nnz, std::int64_t features, int layers = 2) {
  ModelConfig cfg = parse_model_config(
      "name: gcn\nfamily: gnn\nlayers: " + std::to_string(layers) +
          "\ndims: {hidden: 128}\nlayer:\n  - {name: aggregate, op: spmm}\n  - {name: update, op: gemm, out: hidden}\n",
      "test");
  return build_workload(cfg, {.nodes = nodes, .nnz = nnz, .feature_len = features});
}

double score(double period, double energy, Objective o) { return o == Objective::perf ? period : energy; }
double score_of(const Plan& p, Objective o) { return score(p.period_s, p.energy_j, o); }

double worst_stage_footprint(const Plan& p, const CostModel& m) {
  double worst = 0;
  for (const Stage& s : p.stages) worst = std::max(worst, m.footprint(s.first, s.last, {s.kind, s.count}).total());
  return worst;
}

TEST(SchedMemory, KernelFootprintFollowsTheRowSplit) {
  kernels::OpShape spmm{.kind = kernels::OpKind::spmm, .m = 1000, .k = 1000, .n = 64, .nnz = 10000};
  const Footprint one = kernel_footprint(spmm, 256000, 256000, 1), two = kernel_footprint(spmm, 256000, 256000, 2);
  EXPECT_DOUBLE_EQ(one.graph, 8.0 * 10000 + 4.0 * 1001);
  EXPECT_DOUBLE_EQ(two.graph, one.graph / 2);
  EXPECT_DOUBLE_EQ(two.activations, 256000 + 128000);  // the whole input, half the output
  kernels::OpShape gemm{.kind = kernels::OpKind::gemm, .m = 1000, .k = 64, .n = 32};
  const Footprint g = kernel_footprint(gemm, 256000, 128000, 4);
  EXPECT_DOUBLE_EQ(g.weights, 4.0 * (64 * 32 + 32));  // replicated on every device
  EXPECT_DOUBLE_EQ(g.activations, (256000 + 128000) / 4.0);
  Footprint both = one;
  both.add(g);
  EXPECT_DOUBLE_EQ(both.weights, g.weights);
  EXPECT_DOUBLE_EQ(both.graph, one.graph);
  EXPECT_DOUBLE_EQ(both.total(), g.weights + one.graph + Footprint::kInFlight * one.activations);
}

// The fastest plan without a limit holds the whole graph on one device of each stage; with the
// devices' memory just below that, the planner splits the rows over more devices instead.
TEST(SchedMemory, BestPlanWithoutALimitDoesNotFitAndTheChoiceDoes) {
  SystemSpec sys = paper_testbed();
  const Workload wl = gcn(2'000'000, 400'000'000, 128);
  for (Objective o : {Objective::perf, Objective::energy, Objective::balanced}) {
    SystemSpec unlimited = sys;
    const AdditiveCostModel free_model = AdditiveCostModel::from_gflops(unlimited, wl);
    const Plan best = solve(unlimited, free_model, {.objective = o});
    const double need = worst_stage_footprint(best, free_model);
    SystemSpec limited = sys;
    for (auto& k : limited.kinds) k.memory_bytes = need * 0.95;
    const AdditiveCostModel model = AdditiveCostModel::from_gflops(limited, wl);
    Plan fits;
    ASSERT_NO_THROW(fits = solve(limited, model, {.objective = o})) << to_string(o) << " unlimited " << best.mnemonic;
    EXPECT_NE(fits.mnemonic, best.mnemonic) << to_string(o);
    EXPECT_LE(worst_stage_footprint(fits, model), need * 0.95) << fits.mnemonic;
    EXPECT_GE(score_of(fits, o), score_of(best, o)) << "a limit cannot make the optimum better";
    std::printf("%s: unlimited %s needs %.3g GB a device; with %.3g GB the plan is %s (%.3g GB)\n", to_string(o),
                best.mnemonic.c_str(), need / 1e9, need * 0.95 / 1e9, fits.mnemonic.c_str(),
                worst_stage_footprint(fits, model) / 1e9);
  }
}

TEST(SchedMemory, NothingFitsNamesTheClosestGroupAndTheShortfall) {
  SystemSpec sys = paper_testbed();
  for (auto& k : sys.kinds) k.memory_bytes = 1e6;  // 1 MB devices
  const Workload wl = gcn(100'000, 5'000'000, 64);
  const AdditiveCostModel model = AdditiveCostModel::from_gflops(sys, wl);
  try {
    solve(sys, model, {});
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("fits no device's memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("short by"), std::string::npos) << e.what();
  }
}

// A table model with random per-kernel footprints (weights add, the rest takes the largest, as
// the real models do) and random device memory: the exact solver, over flat and recurrent shapes,
// matches the brute force, and every stage of its plan fits.
class FootprintTableModel : public CostModel {
 public:
  FootprintTableModel(const TableCostModel& t, std::vector<Footprint> per_kernel)
      : t_(t), per_kernel_(std::move(per_kernel)) {}
  int num_kernels() const override { return t_.num_kernels(); }
  double compute_time_s(int a, int b, DeviceGroup g) const override { return t_.compute_time_s(a, b, g); }
  double output_bytes(int k) const override { return t_.output_bytes(k); }
  double transfer_time_s(int k, DeviceGroup f, DeviceGroup to) const override { return t_.transfer_time_s(k, f, to); }
  Footprint footprint(int a, int b, DeviceGroup g) const override {
    Footprint f;
    for (int k = a; k <= b; ++k) {
      Footprint one = per_kernel_[static_cast<std::size_t>(k)];
      one.graph /= g.count;
      one.activations /= g.count;
      f.add(one);
    }
    return f;
  }

 private:
  const TableCostModel& t_;
  std::vector<Footprint> per_kernel_;
};

TEST(SchedMemory, ExactMatchesBruteForceUnderRandomLimits) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int checked = 0, limited = 0;
  for (int inst = 0; inst < 300; ++inst) {
    const int layers = 2 + static_cast<int>(u01(rng) * 2), per_layer = 1 + static_cast<int>(u01(rng) * 2);
    const int n = layers * per_layer, kinds = 1 + static_cast<int>(u01(rng) * 2);
    SystemSpec sys;
    std::vector<int> counts;
    for (int t = 0; t < kinds; ++t) {
      DeviceKindSpec d{.name = "k" + std::to_string(t), .letter = "FG"[t], .count = 1 + static_cast<int>(u01(rng) * 3),
                       .power = {10 + 40 * u01(rng), 0, 0}, .link_bw_bytes_per_s = 1e9};
      d.power.exec_w = d.power.idle_w + 200 * u01(rng);
      d.power.xfer_w = d.power.idle_w + 50 * u01(rng);
      d.memory_bytes = 50 + 150 * u01(rng);
      sys.kinds.push_back(d);
      counts.push_back(d.count);
    }
    TableCostModel t(counts, n);
    std::vector<double> base(static_cast<std::size_t>(n * kinds));
    for (auto& b : base) b = 0.1 + 10 * u01(rng);
    for (int a = 0; a < n; ++a)
      for (int tk = 0; tk < kinds; ++tk) {
        double sum = 0;
        for (int b = a; b < n; ++b) {
          sum += base[static_cast<std::size_t>(b * kinds + tk)];
          for (int c = 1; c <= counts[static_cast<std::size_t>(tk)]; ++c) t.set_compute(a, b, {tk, c}, sum / (c * 0.8) + 0.1 * (c - 1));
        }
      }
    for (int k = 0; k + 1 < n; ++k)
      for (int a = 0; a < kinds; ++a)
        for (int ca = 1; ca <= counts[static_cast<std::size_t>(a)]; ++ca)
          for (int b = 0; b < kinds; ++b)
            for (int cb = 1; cb <= counts[static_cast<std::size_t>(b)]; ++cb) t.set_transfer(k, {a, ca}, {b, cb}, 2 * u01(rng));
    std::vector<Footprint> fp;
    for (int k = 0; k < n; ++k) fp.push_back({.weights = 20 * u01(rng), .graph = 60 * u01(rng), .activations = 30 * u01(rng)});
    const FootprintTableModel model(t, fp);
    const auto shapes = recurrent_shapes(std::vector<kernels::OpKind>(static_cast<std::size_t>(n), kernels::OpKind::gemm), layers);
    const auto all = enumerate_shape_plans(sys, model, shapes);
    std::vector<EnumeratedPlan> plans;
    for (const auto& p : all) plans.push_back(p.plan);
    const CostTables tables(sys, model);
    limited += tables.memory_limited();
    for (Objective o : {Objective::perf, Objective::energy, Objective::balanced}) {
      const EnumeratedPlan want = best_of(plans, {.objective = o});
      if (!(score(want.period_s, want.energy_j, o) < kInf)) {
        EXPECT_THROW(solve_shapes(sys, model, shapes, {.objective = o}), InfeasibleError);
        continue;
      }
      const Plan got = solve_shapes(sys, model, shapes, {.objective = o});
      const double a = score(got.period_s, got.energy_j, o), b = score(want.period_s, want.energy_j, o);
      ASSERT_LE(std::abs(a - b), 1e-9 * b) << "instance " << inst << " " << to_string(o) << " " << got.mnemonic;
      const Shape shape = got.rounds > 1 ? Shape{got.rounds, got.round_kernels} : Shape{1, n};
      const FoldedCostModel folded(model, shape);
      for (const Stage& s : got.stages) {
        const double need = (got.rounds > 1 ? static_cast<const CostModel&>(folded) : model)
                                .footprint(s.first, s.last, {s.kind, s.count})
                                .total();
        EXPECT_LE(need, sys.kinds[static_cast<std::size_t>(s.kind)].memory_bytes) << "instance " << inst;
      }
      ++checked;
    }
  }
  std::printf("memory brute force: %d solves checked, %d of 300 instances with ranges ruled out by memory\n", checked,
              limited);
  EXPECT_GT(limited, 100);
}

}  // namespace
}  // namespace dype::sched
