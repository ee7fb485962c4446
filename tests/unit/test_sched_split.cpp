// DiviML's lower bounds (lower_bound.h) and MILP-SPLIT (milp_split.h) against the brute force on
// random small instances: a bound never exceeds the optimum the enumerator finds (and how far below
// it stays is printed), MILP-SPLIT finds the optimum of the plans it covers and never beats the
// optimum of all plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "../test_sched_instances.h"
#include "scheduler/solver.h"
#include "scheduler/solver/lower_bound.h"
#include "scheduler/solver/milp_split.h"

namespace dype::sched {
namespace {

double score(const EnumeratedPlan& p, Objective o) {
  return o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
}
bool close(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b)); }

// How far a bound stays below the optimum, (OPT - bound) / OPT.
struct Gap {
  int count = 0;
  double sum = 0, worst = 0;
  void add(double opt, double bound) {
    const double g = opt > 0 ? (opt - bound) / opt : 0.0;
    ++count, sum += g, worst = std::max(worst, g);
  }
  void print(const char* what) const {
    std::printf("  %-34s %4d solves  gap mean %6.2f%%  worst %6.2f%%\n", what, count, count ? 100 * sum / count : 0.0,
                100 * worst);
  }
};

// Every kernel range's time the sum of its kernels' (the additive models' shape): MILP-SPLIT's
// continued stages cover every plan then.
class AdditiveRanges final : public CostModel {
 public:
  explicit AdditiveRanges(const CostModel& base) : base_(base) {}
  int num_kernels() const override { return base_.num_kernels(); }
  double compute_time_s(int a, int b, DeviceGroup g) const override {
    double sum = 0;
    for (int k = a; k <= b; ++k) sum += base_.compute_time_s(k, k, g);
    return sum;
  }
  double output_bytes(int k) const override { return base_.output_bytes(k); }
  double transfer_time_s(int k, DeviceGroup f, DeviceGroup t) const override { return base_.transfer_time_s(k, f, t); }

 private:
  const CostModel& base_;
};

TEST(SchedSplit, LowerBoundsNeverExceedTheOptimum) {
  std::mt19937_64 rng(1811);
  constexpr int kInstances = 700;
  const Objective objectives[] = {Objective::perf, Objective::energy, Objective::balanced, Objective::qos,
                                  Objective::latency};
  Gap split[5], lp[5], split_additive[5];
  int checked[5] = {}, one_module = 0;
  double split_s = 0, lp_s = 0;
  for (int inst = 0; inst < kInstances; ++inst) {
    Instance in = random_instance(rng, 5, inst % 2 == 1);
    const bool overlap = inst % 3 == 2;  // sided hand-offs and copies overlapping compute
    if (overlap) in.system.transfers = TransferMode::overlap;
    const OverlapModel om(in, rng);
    const CostTables tables(in.system, overlap ? static_cast<const CostModel&>(om.copies) : *in.model);
    const auto all = enumerate_plans(tables);
    const SplitOptions opt{.max_module_kernels = 2};
    const bool split_up = split_modules(tables, 2, Objective::latency).size() > 1;
    one_module += !split_up;
    for (int i = 0; i < 5; ++i) {
      const Objective o = objectives[i];
      const ObjectiveSpec spec = random_objective(o, all, rng);
      const double want = score(best_of(all, spec), o);
      if (!(want < kInf)) continue;
      const Bounds b = lower_bounds(tables, spec, opt);
      ++checked[i];
      split_s += b.split.solve_time_s, lp_s += b.lp.solve_time_s;
      const std::string where = "instance " + std::to_string(inst) + " " + to_string(o);
      if (o == Objective::perf || o == Objective::latency) {
        ASSERT_TRUE(b.split.ok) << where;
        EXPECT_LE(b.split.value, want * (1 + 1e-9)) << where << ": " << b.split.method;
        if (split_up) split[i].add(want, b.split.value);
      } else {
        EXPECT_FALSE(b.split.ok) << where;
      }
      ASSERT_TRUE(b.lp.ok) << where << ": " << b.lp.why_not;
      EXPECT_LE(b.lp.value, want * (1 + 1e-6)) << where;
      lp[i].add(want, b.lp.value);
      // UBound: no plan's throughput above it.
      double fastest = kInf;
      for (const auto& p : all) fastest = std::min(fastest, p.period_s);
      EXPECT_LE(1.0 / fastest, b.max_throughput_per_s * (1 + 1e-9)) << where;
      if (::testing::Test::HasFailure()) return;
    }
    // The same instance with additive ranges (the product's cost models' shape): no slack at a cut.
    const AdditiveRanges additive(*in.model);
    const CostTables sums(in.system, additive);
    const auto all_sums = enumerate_plans(sums);
    if (split_modules(sums, 2, Objective::latency).size() < 2) continue;
    for (const int i : {0, 4}) {
      const ObjectiveSpec spec{.objective = objectives[i]};
      const double want = score(best_of(all_sums, spec), objectives[i]);
      if (!(want < kInf)) continue;
      const Bound b = module_split_bound(sums, spec, {.max_module_kernels = 2});
      EXPECT_LE(b.value, want * (1 + 1e-9)) << "instance " << inst << " additive " << to_string(objectives[i]);
      split_additive[i].add(want, b.value);
    }
  }
  std::printf("lower bounds <= the brute-force optimum on every solve (%d instances, modules of <= 2 kernels; "
              "%d instances one module; a third with overlapping transfers); measured time module split %.2f s, "
              "LP %.2f s\n", kInstances, one_module, split_s, lp_s);
  for (int i = 0; i < 5; ++i) {
    EXPECT_GE(checked[i], 500) << to_string(objectives[i]);
    const std::string name = to_string(objectives[i]);
    if (split[i].count) split[i].print((name + ": module split (>= 2 modules)").c_str());
    if (split_additive[i].count) split_additive[i].print((name + ": split, additive ranges").c_str());
    lp[i].print((name + ": LP relaxation").c_str());
  }
}

// The plans MILP-SPLIT covers: at every cut a stage ends, or the stage spanning it is on a group
// whose compute is additive across it (computed here from the tables, not by milp_split.cpp).
bool covered(const EnumeratedPlan& p, const CostTables& t, const std::vector<Module>& modules) {
  for (std::size_t j = 0; j + 1 < modules.size(); ++j) {
    const int m = modules[j].last;
    for (const StageSpec& s : p.stages) {
      if (!(s.first <= m && m < s.last)) continue;
      for (int a = 0; a <= m; ++a)
        for (int b = m + 1; b < t.num_kernels(); ++b) {
          const double whole = t.compute(a, b, s.kc), parts = t.compute(a, m, s.kc) + t.compute(m + 1, b, s.kc);
          if (whole < kInf && std::abs(parts - whole) > 1e-9 * whole) return false;
        }
    }
  }
  return true;
}

TEST(SchedSplit, MilpSplitFindsTheLeastLatencyOfItsPlansAndNeverBeatsTheOptimum) {
  std::mt19937_64 rng(4242);
  constexpr int kInstances = 600;
  int compared = 0, optimal = 0, multi = 0, additive_optimal = 0, additive_multi = 0;
  double split_s = 0, milp_s = 0;
  for (int inst = 0; inst < kInstances; ++inst) {
    Instance in = random_instance(rng, 5, inst % 2 == 1);
    const AdditiveRanges additive(*in.model);
    for (const bool sums : {false, true}) {
      const CostTables tables(in.system, sums ? static_cast<const CostModel&>(additive) : *in.model);
      const auto all = enumerate_plans(tables);
      const std::vector<Module> modules = split_modules(tables, 2, Objective::latency);
      double want = kInf, want_covered = kInf;
      for (const auto& p : all) {
        want = std::min(want, p.latency_s);
        if (covered(p, tables, modules)) want_covered = std::min(want_covered, p.latency_s);
      }
      if (!(want < kInf)) continue;
      detail::Caps caps;
      const auto t0 = std::chrono::steady_clock::now();
      const detail::Found f = detail::solve_milp_split(tables, {.objective = Objective::latency}, caps, nullptr, 2);
      const auto t1 = std::chrono::steady_clock::now();
      const Plan milp = solve(tables, {.objective = Objective::latency}, SolverKind::milp);
      split_s += std::chrono::duration<double>(t1 - t0).count();
      milp_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      const std::string where = "instance " + std::to_string(inst) + (sums ? " (additive)" : "");
      ASSERT_TRUE(f.ok) << where;
      const Plan p = evaluate(f.stages, tables);  // feasible: the devices fit, every stage runs
      EXPECT_LT(p.period_s, kInf) << where;
      EXPECT_TRUE(close(p.latency_s, want_covered)) << where << ": milp-split " << p.latency_s << " (" << p.mnemonic
                                                    << "), best covered plan " << want_covered;
      EXPECT_GE(p.latency_s, want * (1 - 1e-9)) << where;
      if (sums) {
        EXPECT_TRUE(close(p.latency_s, want)) << where << ": additive ranges, optimum " << want;
      }
      ++compared;
      optimal += close(p.latency_s, want);
      multi += modules.size() > 1;
      if (sums) additive_multi += modules.size() > 1, additive_optimal += close(p.latency_s, want);
      (void)milp;
      if (::testing::Test::HasFailure()) return;
    }
  }
  std::printf("milp-split (latency, modules of <= 2 kernels): the least latency of its plans on all %d solves "
              "(%d with >= 2 modules), the optimum of all plans on %d (on %d of the additive-range ones, all "
              "of them); measured time milp-split %.2f s, milp %.2f s\n",
              compared, multi, optimal, additive_optimal, split_s, milp_s);
  EXPECT_GE(compared, 1000);
  EXPECT_GE(additive_multi, 300);
}

TEST(SchedSplit, MilpSplitRefusesObjectivesItCannotCombine) {
  std::mt19937_64 rng(7);
  Instance in = random_instance(rng, 4);
  const CostTables tables(in.system, *in.model);
  for (const Objective o : {Objective::perf, Objective::energy, Objective::balanced, Objective::qos}) {
    EXPECT_THROW(solve(tables, {.objective = o}, SolverKind::milp_split), InputError) << to_string(o);
  }
  EXPECT_THROW(solve(tables, {.objective = Objective::latency, .min_throughput_per_s = 1e-3}, SolverKind::milp_split),
               InputError);
  const Plan p = solve(tables, {.objective = Objective::latency}, SolverKind::milp_split);
  EXPECT_EQ(p.solver, "milp-split");
  ASSERT_EQ(p.passes.size(), 1u);
}

}  // namespace
}  // namespace dype::sched
