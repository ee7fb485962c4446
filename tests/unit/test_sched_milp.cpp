// The MILP planner (solver "milp", COIN-OR CBC) against the exact DP and the brute force on random
// small instances, for every objective, with serial and with overlapping transfers: two exact
// solvers built independently must agree on the optimum.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "../test_sched_instances.h"
#include "scheduler/solver.h"

namespace dype::sched {
namespace {

double score(const Plan& p, Objective o) {
  return o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
}
double score(const EnumeratedPlan& p, Objective o) {
  return o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
}
// CBC's tolerances are 1e-7 of the instance's scale; a near-tie inside them may go either way.
bool close(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b)); }

struct Tally {
  int compared = 0, infeasible = 0;
  double milp_s = 0, exact_s = 0;
};

// Every objective, with random caps, on `tables`: MILP, exact DP and brute force agree.
void compare(const CostTables& tables, std::mt19937_64& rng, int inst, Tally& tally) {
  const auto all = enumerate_plans(tables);
  for (Objective o : {Objective::perf, Objective::energy, Objective::balanced, Objective::qos, Objective::latency}) {
    const ObjectiveSpec spec = random_objective(o, all, rng);
    const double want = score(best_of(all, spec), o);
    if (!(want < kInf)) {
      EXPECT_THROW(solve(tables, spec, SolverKind::milp), InfeasibleError) << "instance " << inst << " " << to_string(o);
      ++tally.infeasible;
      continue;
    }
    Plan milp, exact;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_NO_THROW(milp = solve(tables, spec, SolverKind::milp)) << "instance " << inst << " " << to_string(o);
    auto t1 = std::chrono::steady_clock::now();
    exact = solve(tables, spec, SolverKind::exact);
    auto t2 = std::chrono::steady_clock::now();
    tally.milp_s += std::chrono::duration<double>(t1 - t0).count();
    tally.exact_s += std::chrono::duration<double>(t2 - t1).count();
    EXPECT_EQ(milp.solver, "milp");
    EXPECT_TRUE(close(score(milp, o), score(exact, o)))
        << "instance " << inst << " " << to_string(o) << ": milp " << score(milp, o) << " (" << milp.mnemonic
        << ") vs exact " << score(exact, o) << " (" << exact.mnemonic << ")";
    EXPECT_TRUE(close(score(milp, o), want)) << "instance " << inst << " " << to_string(o) << ": milp " << score(milp, o) << " (" << milp.mnemonic << "), brute force " << want;
    // The MILP's plan meets the objective's caps (up to the same tolerance).
    if (o == Objective::qos || o == Objective::latency) {
      if (spec.min_throughput_per_s > 0) {
        EXPECT_LE(milp.period_s, (1 + 1e-6) / spec.min_throughput_per_s);
      }
      EXPECT_LE(milp.latency_s, spec.max_latency_s * (1 + 1e-6));
    }
    if (o == Objective::balanced) {
      EXPECT_LE(milp.period_s, solve(tables, {.objective = Objective::perf}).period_s / spec.balance_ratio * (1 + 1e-6));
    }
    ++tally.compared;
  }
}

TEST(SchedMilp, AgreesWithTheExactDpOnRandomInstancesForEveryObjective) {
  std::mt19937_64 rng(2025);
  Tally tally;
  constexpr int kInstances = 600;
  for (int inst = 0; inst < kInstances; ++inst) {
    Instance in = random_instance(rng, 5, inst % 2 == 1);
    const CostTables tables(in.system, *in.model);
    compare(tables, rng, inst, tally);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("milp: agreed with the exact DP and brute force on %d solves over %d instances (%d infeasible "
              "targets refused by both); total solve time milp %.2f s, exact %.2f s (measured)\n",
              tally.compared, kInstances, tally.infeasible, tally.milp_s, tally.exact_s);
  EXPECT_GT(tally.compared, 5 * kInstances * 8 / 10);
}

TEST(SchedMilp, AgreesWithTheExactDpWithSidedAndOverlappingTransfers) {
  std::mt19937_64 rng(31);
  Tally tally;
  for (int inst = 0; inst < 150; ++inst) {
    Instance in = random_instance(rng, 5, inst % 2 == 1);
    in.system.transfers = TransferMode::overlap;
    const OverlapModel model(in, rng);
    const CostTables tables(in.system, model.copies);
    ASSERT_TRUE(tables.overlap());
    compare(tables, rng, inst, tally);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("milp under overlap: agreed on %d solves\n", tally.compared);
  EXPECT_GT(tally.compared, 450);
}

TEST(SchedMilp, AgreesWithTheExactDpWithPinnedEnds) {
  // Layer-recurrent solves pin the first and last stage's groups and charge the hand-off between
  // rounds to them (CostTables::set_ends): every other group's entry and exit is kInf.
  std::mt19937_64 rng(57);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  Tally tally;
  for (int inst = 0; inst < 150; ++inst) {
    Instance in = random_instance(rng, 5, inst % 2 == 1);
    CostTables tables(in.system, *in.model);
    std::vector<double> entry(static_cast<std::size_t>(tables.num_kc()), kInf), exit = entry;
    entry[static_cast<std::size_t>(rng() % entry.size())] = 0.5 * u01(rng);
    exit[static_cast<std::size_t>(rng() % exit.size())] = 0.5 * u01(rng);
    tables.set_ends(entry, exit);
    const auto all = enumerate_plans(tables);
    bool any = false;
    for (const auto& p : all) any = any || p.period_s < kInf;
    if (!any) continue;  // the pinned groups cannot both be ends of one plan
    compare(tables, rng, inst, tally);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("milp with pinned ends: agreed on %d solves\n", tally.compared);
  EXPECT_GT(tally.compared, 150);
}

TEST(SchedMilp, HandCheckedThreeKernelChain) {
  // Two kinds, one device each; kernel k takes 1, 4, 1 s on kind 0 and 3, 1, 3 s on kind 1, every
  // hand-off 0.5 s. One device alone: 6 s or 7 s. Splitting 0 | 1 | 2 needs three devices. Best
  // two-stage plans: [0] on kind 0 (1 + 0.5 = 1.5) then [1,2] on kind 1 (0.5 + 4 = 4.5), or [0,1]
  // on kind 1 (4 + 0.5) then [2] on kind 0 (1.5): period 4.5 s either way.
  SystemSpec sys;
  for (int t = 0; t < 2; ++t) {
    DeviceKindSpec d;
    d.link_bw_bytes_per_s = 1e9;
    d.name = t ? "gpu" : "fpga";
    d.letter = t ? 'G' : 'F';
    d.count = 1;
    d.power = {.idle_w = 10, .exec_w = 100, .xfer_w = 20};
    sys.kinds.push_back(d);
  }
  TableCostModel model({1, 1}, 3);
  const double t0[] = {1, 4, 1}, t1[] = {3, 1, 3};
  for (int a = 0; a < 3; ++a) {
    double s0 = 0, s1 = 0;
    for (int b = a; b < 3; ++b) {
      s0 += t0[b];
      s1 += t1[b];
      model.set_compute(a, b, {0, 1}, s0);
      model.set_compute(a, b, {1, 1}, s1);
    }
  }
  for (int k = 0; k < 2; ++k)
    for (int f = 0; f < 2; ++f)
      for (int g = 0; g < 2; ++g) model.set_transfer(k, {f, 1}, {g, 1}, 0.5);
  const CostTables tables(sys, model);
  const Plan p = solve(tables, {.objective = Objective::perf}, SolverKind::milp);
  EXPECT_NEAR(p.period_s, 4.5, 1e-9) << p.mnemonic;
  ASSERT_EQ(p.stages.size(), 2u);
  // Energy, c ((p_exec - p_idle) C + (p_xfer - p_idle) X + p_idle P) per stage: kind 0 alone
  // 90 x 6 + 10 x 6 = 600 J, kind 1 alone 700 J; either two-stage plan 140 + 410 = 550 J.
  const Plan e = solve(tables, {.objective = Objective::energy}, SolverKind::milp);
  EXPECT_NEAR(e.energy_j, 550.0, 1e-6) << e.mnemonic;
  EXPECT_EQ(e.stages.size(), 2u);
}

}  // namespace
}  // namespace dype::sched
