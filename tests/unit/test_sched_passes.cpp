// The passes a solve runs are recorded in the plan (Plan::passes, dype-schedule --explain), in
// order and numbered as in scheduler/solver/exact.cpp and paper.cpp; the last exact pass that
// found a plan is the plan.
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/solver.h"

namespace dype::sched {
namespace {

struct Instance {
  SystemSpec system;
  std::unique_ptr<TableCostModel> model;
};

// `kernels` kernels on two kinds of `count` devices each: kind 0 is slow and frugal, kind 1 fast
// and hungry; c devices run a range c x 0.8 as fast; every transfer costs 0.1 s.
Instance two_kinds(int kernels, int count) {
  Instance in;
  for (int t = 0; t < 2; ++t) {
    DeviceKindSpec d;
    d.name = t == 0 ? "fpga" : "gpu";
    d.letter = t == 0 ? 'F' : 'G';
    d.count = count;
    d.power = t == 0 ? PowerStates{.idle_w = 10, .exec_w = 40, .xfer_w = 20}
                     : PowerStates{.idle_w = 30, .exec_w = 250, .xfer_w = 60};
    d.link_bw_bytes_per_s = 1e9;
    in.system.kinds.push_back(d);
  }
  in.model = std::make_unique<TableCostModel>(std::vector<int>{count, count}, kernels);
  for (int a = 0; a < kernels; ++a) {
    for (int b = a; b < kernels; ++b) {
      for (int t = 0; t < 2; ++t) {
        const double one = (b - a + 1) * (t == 0 ? 2.0 : 1.0);
        for (int c = 1; c <= count; ++c) in.model->set_compute(a, b, {t, c}, c == 1 ? one : one / (0.8 * c));
      }
    }
  }
  for (int k = 0; k + 1 < kernels; ++k) {
    for (int t = 0; t < 2; ++t) {
      for (int t2 = 0; t2 < 2; ++t2) {
        for (int c = 1; c <= count; ++c) {
          for (int c2 = 1; c2 <= count; ++c2) in.model->set_transfer(k, {t, c}, {t2, c2}, 0.1);
        }
      }
    }
  }
  return in;
}

std::vector<int> numbers(const Plan& p) {
  std::vector<int> out;
  for (const SolverPass& s : p.passes) out.push_back(s.number);
  return out;
}

// Every recorded pass is named, says how it searched, and the plan is the last pass's find.
void expect_well_formed(const Plan& p) {
  ASSERT_FALSE(p.passes.empty());
  for (const SolverPass& s : p.passes) {
    EXPECT_FALSE(s.name.empty()) << "pass " << s.number;
    EXPECT_FALSE(s.method.empty()) << "pass " << s.number;
    EXPECT_FALSE(s.work.empty()) << "pass " << s.number;
  }
  if (p.solver == "exact") {
    const SolverPass& last = p.passes.back();
    ASSERT_TRUE(last.found);
    EXPECT_DOUBLE_EQ(last.period_s, p.period_s);
    EXPECT_DOUBLE_EQ(last.energy_j, p.energy_j);
  }
}

TEST(SchedPasses, ExactRecordsItsPassesPerObjective) {
  const Instance in = two_kinds(3, 2);
  const CostTables tables(in.system, *in.model);

  const Plan perf = solve(tables, {.objective = Objective::perf});
  EXPECT_EQ(numbers(perf), (std::vector<int>{1, 2}));
  EXPECT_EQ(perf.passes[0].method, "period search");
  EXPECT_EQ(perf.passes[1].method, "label DP");
  // The tie-break keeps the fastest period.
  EXPECT_DOUBLE_EQ(perf.passes[0].period_s, perf.period_s);
  expect_well_formed(perf);

  const Plan energy = solve(tables, {.objective = Objective::energy});
  EXPECT_EQ(numbers(energy), (std::vector<int>{4, 5}));
  expect_well_formed(energy);

  // Small space: no uncapped seed (pass 3); the cap is the fastest period / ratio.
  const Plan balanced = solve(tables, {.objective = Objective::balanced, .balance_ratio = 0.5});
  EXPECT_EQ(numbers(balanced), (std::vector<int>{1, 4, 5}));
  EXPECT_LE(balanced.period_s, balanced.passes[0].period_s / 0.5 * (1 + 1e-9));
  expect_well_formed(balanced);

  const Plan qos = solve(tables, {.objective = Objective::qos, .min_throughput_per_s = 0.2});
  EXPECT_EQ(numbers(qos), (std::vector<int>{4, 5}));
  expect_well_formed(qos);
}

TEST(SchedPasses, LargeSpacesSeedWithoutThePeriodCapFirst) {
  // (12 + 1) kernels x 6 groups x 16 usages >= 1024 label states: pass 3 runs, and pass 4 only
  // when pass 3's plan breaks the cap.
  const Instance in = two_kinds(12, 3);
  const CostTables tables(in.system, *in.model);
  int seeds_met_cap = 0;
  for (double ratio : {0.05, 0.95}) {
    const Plan p = solve(tables, {.objective = Objective::balanced, .balance_ratio = ratio});
    const std::vector<int> got = numbers(p);
    ASSERT_GE(got.size(), 3u);
    EXPECT_EQ(got[0], 1);
    EXPECT_EQ(got[1], 3);
    const double cap = p.passes[0].period_s / ratio;
    const bool seed_met_cap = p.passes[1].found && p.passes[1].period_s <= cap * (1 + 1e-9);
    EXPECT_EQ(got, seed_met_cap ? (std::vector<int>{1, 3, 5}) : (std::vector<int>{1, 3, 4, 5})) << "ratio " << ratio;
    seeds_met_cap += seed_met_cap ? 1 : 0;
    expect_well_formed(p);
  }
  EXPECT_EQ(seeds_met_cap, 1);  // one ratio of each kind, so both orders are checked
}

TEST(SchedPasses, PaperRecordsAlgorithm1AndItsReview) {
  const Instance in = two_kinds(3, 2);
  const Plan p = solve(CostTables(in.system, *in.model), {.objective = Objective::energy}, SolverKind::paper);
  EXPECT_EQ(numbers(p), (std::vector<int>{1, 2}));
  EXPECT_EQ(p.passes[0].method, "Algorithm 1");
  ASSERT_TRUE(p.passes[1].found);
  EXPECT_DOUBLE_EQ(p.passes[1].energy_j, p.energy_j);
  expect_well_formed(p);
}

}  // namespace
}  // namespace dype::sched
