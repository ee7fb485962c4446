// Power per kernel: the U280 draws 19.5 W idle plus 55 W dynamic for Sextans SpMM and 50.2 W for
// SWAT window attention (paper Table II; configs/bitstreams/u280-sextans-swat.yaml), and the cost
// tables, the energy figures and the exact solver use each kernel's own figure. Modelled.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/planning/schedule_inputs.h"
#include "scheduler/recurrent.h"

namespace dype::sched {
namespace {

const std::string kSystem = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";

int kc_of(const CostTables& t, const std::string& kind, int count) {
  for (int k = 0; k < t.num_kinds(); ++k)
    if (t.kind_name(k) == kind) return t.kc({k, count});
  ADD_FAILURE() << "no kind " << kind;
  return 0;
}

TEST(KernelPower, TableTwoFiguresReachTheCostTables) {
  const auto gcn = rt::load_schedule_inputs(kSystem, std::string(DYPE_SOURCE_DIR) + "/configs/models/gcn.yaml",
                                            {.nodes = 169343, .nnz = 1166243, .feature_len = 128});
  const CostTables g(gcn.system, *gcn.model);
  EXPECT_NEAR(g.exec_w(0, 0, kc_of(g, "fpga", 1)), 19.5 + 55.0, 1e-9);  // l0.aggregate: SpMM
  const auto tf = rt::load_schedule_inputs(kSystem, std::string(DYPE_SOURCE_DIR) + "/configs/models/swin-transformer.yaml",
                                           {.seq_len = 4096, .window = 512});
  const CostTables t(tf.system, *tf.model);
  EXPECT_NEAR(t.exec_w(1, 1, kc_of(t, "fpga", 3)), 19.5 + 50.2, 1e-9);  // l0.attention
  // The GPU's kernels keep its single figure (45 W static + 300 W dynamic).
  EXPECT_NEAR(t.exec_w(0, 4, kc_of(t, "gpu", 1)), 345.0, 1e-9);
  // A plan's energy uses them: one stage of 3 FPGAs running only attention would draw 69.7 W each.
  const Plan p = solve_shapes(tf.system, *tf.model, recurrent_shapes(tf.workload), {.objective = Objective::energy});
  ASSERT_GT(p.rounds, 1) << p.mnemonic;
  for (const Stage& s : p.stages) {
    if (tf.system.kinds[static_cast<std::size_t>(s.kind)].name == "fpga") {
      EXPECT_NEAR(t.exec_w(s.first, s.last, t.kc({s.kind, s.count})), 69.7, 1e-9);
    }
  }
}

// Random per-range execute powers (>= idle): the exact solver over flat and recurrent shapes still
// equals the brute force for every objective.
class PoweredTable : public CostModel {
 public:
  PoweredTable(const TableCostModel& t, std::vector<double> per_kernel_w) : t_(t), w_(std::move(per_kernel_w)) {}
  int num_kernels() const override { return t_.num_kernels(); }
  double compute_time_s(int a, int b, DeviceGroup g) const override { return t_.compute_time_s(a, b, g); }
  double output_bytes(int k) const override { return t_.output_bytes(k); }
  double transfer_time_s(int k, DeviceGroup f, DeviceGroup to) const override { return t_.transfer_time_s(k, f, to); }
  double execute_w(int a, int b, DeviceGroup g) const override {
    double sum = 0;
    for (int k = a; k <= b; ++k) sum += w_[static_cast<std::size_t>(k * 3 + g.kind)];
    return sum / (b - a + 1);
  }

 private:
  const TableCostModel& t_;
  std::vector<double> w_;
};

TEST(KernelPower, ExactMatchesBruteForceWithPerKernelPower) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int checked = 0;
  for (int inst = 0; inst < 300; ++inst) {
    const int layers = 2 + static_cast<int>(u01(rng) * 2), per_layer = 1 + static_cast<int>(u01(rng) * 2);
    const int n = layers * per_layer, kinds = 1 + static_cast<int>(u01(rng) * 3);
    SystemSpec sys;
    std::vector<int> counts;
    for (int t = 0; t < kinds; ++t) {
      DeviceKindSpec d{.name = "k" + std::to_string(t), .letter = "FGC"[t], .count = 1 + static_cast<int>(u01(rng) * 2),
                       .power = {10 + 40 * u01(rng), 0, 0}, .link_bw_bytes_per_s = 1e9};
      d.power.exec_w = d.power.idle_w + 100 * u01(rng);
      d.power.xfer_w = d.power.idle_w + 30 * u01(rng);
      sys.kinds.push_back(d);
      counts.push_back(d.count);
    }
    TableCostModel t(counts, n);
    for (int a = 0; a < n; ++a)
      for (int k = 0; k < kinds; ++k)
        for (int c = 1; c <= counts[static_cast<std::size_t>(k)]; ++c)
          for (int b = a; b < n; ++b) t.set_compute(a, b, {k, c}, (b - a + 1) * (0.5 + u01(rng)) / c + 0.05 * c);
    for (int k = 0; k + 1 < n; ++k)
      for (int a = 0; a < kinds; ++a)
        for (int ca = 1; ca <= counts[static_cast<std::size_t>(a)]; ++ca)
          for (int b = 0; b < kinds; ++b)
            for (int cb = 1; cb <= counts[static_cast<std::size_t>(b)]; ++cb) t.set_transfer(k, {a, ca}, {b, cb}, u01(rng));
    std::vector<double> w(static_cast<std::size_t>(n * 3));
    for (int k = 0; k < n; ++k)
      for (int d = 0; d < kinds; ++d) w[static_cast<std::size_t>(k * 3 + d)] = sys.kinds[static_cast<std::size_t>(d)].power.idle_w + 300 * u01(rng);
    const PoweredTable model(t, w);
    const auto shapes = recurrent_shapes(std::vector<kernels::OpKind>(static_cast<std::size_t>(n), kernels::OpKind::gemm), layers);
    std::vector<EnumeratedPlan> plans;
    for (const auto& p : enumerate_shape_plans(sys, model, shapes)) plans.push_back(p.plan);
    for (Objective o : {Objective::perf, Objective::energy, Objective::balanced}) {
      const EnumeratedPlan want = best_of(plans, {.objective = o});
      const Plan got = solve_shapes(sys, model, shapes, {.objective = o});
      const double a = o == Objective::perf ? got.period_s : got.energy_j;
      const double b = o == Objective::perf ? want.period_s : want.energy_j;
      ASSERT_LE(std::abs(a - b), 1e-9 * b) << "instance " << inst << " " << to_string(o) << " " << got.mnemonic;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 900);
}

}  // namespace
}  // namespace dype::sched
