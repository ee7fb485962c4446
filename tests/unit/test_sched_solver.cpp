// The exact DyPe solver against a brute-force enumerator on random instances, the paper's
// Algorithm 1 measured against both, and properties every objective must keep.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <tuple>

#include "scheduler/solver.h"
#include "../test_sched_instances.h"

namespace dype::sched {
namespace {

double score(const Plan& p, Objective o) { return o == Objective::perf ? p.period_s : p.energy_j; }
double score(const EnumeratedPlan& p, Objective o) { return o == Objective::perf ? p.period_s : p.energy_j; }
bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

TEST(SchedSolver, ExactMatchesBruteForceAndMeasuresPaper) {
  std::mt19937_64 rng(20240607);
  constexpr int kInstances = 2000;
  const Objective objs[] = {Objective::perf, Objective::energy, Objective::balanced, Objective::qos};
  int checked[4] = {}, infeasible[4] = {}, paper_worse[4] = {}, paper_failed[4] = {}, paper_violated[4] = {};
  double paper_gap_sum[4] = {}, paper_gap_max[4] = {};
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (int inst = 0; inst < kInstances; ++inst) {
    Instance in = random_instance(rng);
    const CostTables tables(in.system, *in.model);
    const auto all = enumerate_plans(tables);
    double p_min = kInf, l_min = kInf;
    for (const auto& p : all) {
      p_min = std::min(p_min, p.period_s);
      l_min = std::min(l_min, p.latency_s);
    }
    for (int oi = 0; oi < 4; ++oi) {
      ObjectiveSpec spec;
      spec.objective = objs[oi];
      spec.balance_ratio = 0.3 + 0.7 * u01(rng);
      if (objs[oi] == Objective::qos && p_min < kInf) {
        // Targets around what is achievable, some infeasible on purpose.
        if (u01(rng) < 0.8) spec.min_throughput_per_s = (1.0 / p_min) * (0.4 + 0.7 * u01(rng));
        if (u01(rng) < 0.6) spec.max_latency_s = l_min * (0.9 + 1.5 * u01(rng));
      }
      const EnumeratedPlan want = best_of(all, spec);
      const double want_score = score(want, objs[oi]);
      if (!(want_score < kInf)) {
        EXPECT_THROW(solve(tables, spec), InfeasibleError) << "instance " << inst << " objective " << oi;
        ++infeasible[oi];
        continue;
      }
      Plan got;
      ASSERT_NO_THROW(got = solve(tables, spec)) << "instance " << inst << " objective " << oi;
      ASSERT_TRUE(same(score(got, objs[oi]), want_score))
          << "instance " << inst << " objective " << to_string(objs[oi]) << ": exact " << score(got, objs[oi])
          << " (" << got.mnemonic << ") vs brute force " << want_score;
      ++checked[oi];
      try {
        const Plan paper = solve(tables, spec, SolverKind::paper);
        // Balanced: the paper's own perf estimate can be too slow, loosening its throughput floor;
        // such a plan breaks the true constraint and is counted apart.
        const bool breaks =
            (objs[oi] == Objective::balanced && !within(paper.period_s, p_min / spec.balance_ratio));
        const double gap = score(paper, objs[oi]) / want_score - 1.0;
        if (breaks) {
          ++paper_violated[oi];
        } else {
          EXPECT_GE(gap, -1e-9) << "paper beat the optimum on instance " << inst;
          if (gap > 1e-9) {
            ++paper_worse[oi];
            paper_gap_sum[oi] += gap;
            paper_gap_max[oi] = std::max(paper_gap_max[oi], gap);
          }
        }
      } catch (const InfeasibleError&) {
        ++paper_failed[oi];  // the paper's tables lost every plan meeting the targets
      }
    }
  }
  std::printf("exact vs brute force on %d random instances (<= 7 kernels, <= 3 kinds x <= 3 devices):\n",
              kInstances);
  for (int oi = 0; oi < 4; ++oi) {
    std::printf("  %-8s agreed on %4d feasible (+%3d infeasible, both reported); paper suboptimal on %4d "
                "(%.1f%%), mean gap %.2f%%, max gap %.1f%%; paper found no plan on %d, broke the "
                "constraint on %d\n",
                to_string(objs[oi]), checked[oi], infeasible[oi], paper_worse[oi],
                100.0 * paper_worse[oi] / std::max(checked[oi], 1),
                paper_worse[oi] ? 100.0 * paper_gap_sum[oi] / paper_worse[oi] : 0.0, 100.0 * paper_gap_max[oi],
                paper_failed[oi], paper_violated[oi]);
    EXPECT_GT(checked[oi], 300);
  }
}

// Growing stage times (as the additive models give) take the solvers' early exits; they must not
// cost exactness.
TEST(SchedSolver, ExactMatchesBruteForceWhenStagesOnlyGrow) {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int checked = 0;
  for (int inst = 0; inst < 1000; ++inst) {
    Instance in = random_instance(rng, 7, true);
    const CostTables tables(in.system, *in.model);
    ASSERT_TRUE(tables.ranges_grow()) << "instance " << inst;
    const auto all = enumerate_plans(tables);
    for (Objective o : {Objective::perf, Objective::energy, Objective::balanced, Objective::qos}) {
      const ObjectiveSpec spec = random_objective(o, all, rng);
      const double want = score(best_of(all, spec), o);
      if (!(want < kInf)) {
        EXPECT_THROW(solve(tables, spec), InfeasibleError) << "instance " << inst;
        continue;
      }
      Plan got;
      ASSERT_NO_THROW(got = solve(tables, spec)) << "instance " << inst << " " << to_string(o);
      ASSERT_TRUE(same(score(got, o), want)) << "instance " << inst << " " << to_string(o) << ": exact "
                                             << score(got, o) << " (" << got.mnemonic << ") vs " << want;
      ++checked;
    }
  }
  EXPECT_GT(checked, 3000);
}

// ranges_grow() compares every range with both of its one-kernel extensions, those of ranges that
// end at the chain's last kernel too: here kernel 1 alone is slower than kernels 0-1 together, so
// stages do not only grow (a solver bounding the period by kernel 1's time alone would miss the
// one-stage plan).
TEST(SchedSolver, RangesGrowLooksAtEveryExtension) {
  SystemSpec sys;
  sys.kinds = {{.name = "gpu", .letter = 'G', .count = 1, .power = {40, 300, 60}, .link_bw_bytes_per_s = 1e9}};
  TableCostModel m({1}, 2);
  m.set_compute(0, 0, {0, 1}, 1.0);
  m.set_compute(0, 1, {0, 1}, 2.0);
  m.set_compute(1, 1, {0, 1}, 3.0);
  EXPECT_FALSE(CostTables(sys, m).ranges_grow());
  m.set_compute(1, 1, {0, 1}, 1.5);
  EXPECT_TRUE(CostTables(sys, m).ranges_grow());
}


// Every objective (with random caps) solved exactly on `tables` against the brute-force best;
// `each` sees every plan found. Returns how many solves were compared.
template <typename F>
int expect_exact_on_every_objective(const CostTables& tables, std::mt19937_64& rng, int inst, F&& each) {
  const auto all = enumerate_plans(tables);
  int checked = 0;
  for (Objective o : {Objective::perf, Objective::energy, Objective::balanced, Objective::qos}) {
    const ObjectiveSpec spec = random_objective(o, all, rng);
    const EnumeratedPlan best = best_of(all, spec);
    const double want = score(best, o);
    if (!(want < kInf)) {
      EXPECT_THROW(solve(tables, spec), InfeasibleError) << "instance " << inst;
      continue;
    }
    Plan got;
    EXPECT_NO_THROW(got = solve(tables, spec)) << "instance " << inst << " " << to_string(o);
    EXPECT_TRUE(same(score(got, o), want)) << "instance " << inst << " " << to_string(o) << ": exact "
                                           << score(got, o) << " (" << got.mnemonic << ") vs " << want;
    each(got);
    ++checked;
  }
  return checked;
}

TEST(SchedSolver, ExactMatchesBruteForceWithSidedTransfers) {
  std::mt19937_64 rng(4242);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int checked = 0, sided = 0;
  for (int inst = 0; inst < 1000; ++inst) {
    Instance in = random_instance(rng, 7, inst % 2 == 1);
    const SidedTransfers model(*in.model, rng, kind_counts(in.system));
    const CostTables tables(in.system, model);
    checked += expect_exact_on_every_objective(tables, rng, inst, [&](const Plan& got) {
      // The plan's stages carry each side's own time.
      for (std::size_t s = 0; s + 1 < got.stages.size(); ++s)
        sided += got.stages[s].transfer_out_s != got.stages[s + 1].transfer_in_s;
    });
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("sided transfers: exact agreed with brute force on %d solves (%d hand-offs with unequal sides)\n",
              checked, sided);
  EXPECT_GT(checked, 3000);
  EXPECT_GT(sided, 100);
}


// The latency objective (least end-to-end latency, an optional throughput floor): exact and
// Algorithm 1's review against brute force, serial and overlapping transfers.
TEST(SchedSolver, LatencyObjectiveMatchesBruteForce) {
  std::mt19937_64 rng(1357);
  int checked = 0, floored = 0, refused = 0;
  for (int inst = 0; inst < 1200; ++inst) {
    Instance in = random_instance(rng, 7, inst % 2 == 1);
    if (inst % 3 == 0) in.system.transfers = TransferMode::overlap;
    const OverlapModel model(in, rng);
    const CostTables tables(in.system, inst % 3 == 0 ? static_cast<const CostModel&>(model.copies) : model.sided);
    const auto all = enumerate_plans(tables);
    const ObjectiveSpec spec = random_objective(Objective::latency, all, rng);
    const EnumeratedPlan best = best_of(all, spec);
    if (!(best.latency_s < kInf)) {
      EXPECT_THROW(solve(tables, spec), InfeasibleError) << "instance " << inst;
      ++refused;
      continue;
    }
    Plan got;
    ASSERT_NO_THROW(got = solve(tables, spec)) << "instance " << inst;
    ASSERT_TRUE(same(got.latency_s, best.latency_s)) << "instance " << inst << ": exact " << got.latency_s << " ("
                                                      << got.mnemonic << ") vs " << best.latency_s;
    EXPECT_EQ(got.score, got.latency_s);
    if (spec.min_throughput_per_s > 0) {
      EXPECT_LE(got.period_s, (1 + 1e-9) / spec.min_throughput_per_s) << "instance " << inst;
      ++floored;
    }
    ++checked;
  }
  std::printf("latency objective: exact agreed with brute force on %d solves (%d under a throughput floor, %d "
              "floors out of reach refused)\n", checked, floored, refused);
  EXPECT_GT(checked, 900);
  EXPECT_GT(floored, 300);
  EXPECT_GT(refused, 20);
}

TEST(SchedSolver, ExactMatchesBruteForceWithOverlappingTransfers) {
  std::mt19937_64 rng(777);
  int checked = 0, kernel_bound = 0, copy_bound = 0, in_bound = 0, out_bound = 0, stalled = 0, blocked = 0;
  for (int inst = 0; inst < 800; ++inst) {
    Instance in = random_instance(rng, 7, inst % 2 == 1);
    in.system.transfers = TransferMode::overlap;
    const OverlapModel model(in, rng);
    const CostTables tables(in.system, model.copies);
    ASSERT_TRUE(tables.overlap());
    checked += expect_exact_on_every_objective(tables, rng, inst, [&](const Plan& got) {
      // Which side bounds the slowest stage: both must occur for the test to mean anything.
      for (const Stage& st : got.stages) {
        if (!same(st.time_s(), got.period_s)) continue;
        (st.kernels_s() >= std::max(st.inbound_s(), st.outbound_s()) ? kernel_bound : copy_bound) += 1;
        if (st.inbound_s() != st.outbound_s()) (st.inbound_s() > st.outbound_s() ? in_bound : out_bound) += 1;
        stalled += st.stall_s > st.transfer_in_s + st.copy_in_s && same(st.inbound_s(), got.period_s);
        blocked += st.blocked_s > st.copy_out_s && same(st.outbound_s(), got.period_s);
      }
    });
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("overlapping transfers: exact agreed with brute force on %d solves (bottleneck stages bound by "
              "kernels %d, by copies %d; inbound side longer %d, outbound %d; bound by an inbound stall %d, "
              "an outbound block %d)\n", checked, kernel_bound, copy_bound, in_bound, out_bound, stalled, blocked);
  EXPECT_GT(checked, 2400);
  EXPECT_GT(kernel_bound, 100);
  EXPECT_GT(copy_bound, 100);
  EXPECT_GT(in_bound, 100);
  EXPECT_GT(out_bound, 100);
  EXPECT_GT(stalled, 20);
  EXPECT_GT(blocked, 20);
}

// With overlap a plan's period never exceeds the same plan's serial period, and equals it when
// nothing is copied.
TEST(SchedSolver, OverlapNeverSlowsAPlan) {
  std::mt19937_64 rng(99);
  for (int inst = 0; inst < 200; ++inst) {
    Instance in = random_instance(rng, 6, inst % 2 == 1);
    const CopiesInCompute model(*in.model, rng());
    const CostTables serial(in.system, model);
    in.system.transfers = TransferMode::overlap;
    const CostTables overlap(in.system, model);
    const auto a = enumerate_plans(serial);
    const auto b = enumerate_plans(overlap);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!(a[i].period_s < kInf)) continue;
      EXPECT_LE(b[i].period_s, a[i].period_s * (1 + 1e-12)) << inst;
    }
  }
}

// perf returns, among the plans with the least period, the one that uses least energy (its
// tie-break pass prunes labels by completion and energy bounds; those must not lose that plan).
TEST(SchedSolver, PerfBreaksPeriodTiesByLeastEnergy) {
  std::mt19937_64 rng(4242);
  int ties = 0;
  for (int inst = 0; inst < 1200; ++inst) {
    Instance in = random_instance(rng, 7, inst % 2 == 1);
    const CostTables tables(in.system, *in.model);
    const auto all = enumerate_plans(tables);
    double p_min = kInf;
    for (const auto& p : all) p_min = std::min(p_min, p.period_s);
    if (!(p_min < kInf)) continue;
    double e_min = kInf;
    int fastest = 0;
    for (const auto& p : all) {
      if (!same(p.period_s, p_min)) continue;
      e_min = std::min(e_min, p.energy_j);
      ++fastest;
    }
    const Plan got = solve(tables, {Objective::perf});
    ASSERT_TRUE(same(got.period_s, p_min)) << "instance " << inst;
    ASSERT_TRUE(same(got.energy_j, e_min)) << "instance " << inst << ": " << got.mnemonic << " uses "
                                           << got.energy_j << " J, the cheapest fastest plan " << e_min;
    ties += fastest > 1;
  }
  EXPECT_GT(ties, 100);  // the tie-break was exercised (132 of the 1200 with this seed)
}

TEST(SchedSolver, AddingADeviceNeverWorsensThePerfOptimum) {
  std::mt19937_64 rng(7);
  for (int inst = 0; inst < 300; ++inst) {
    Instance in = random_instance(rng);
    for (std::size_t t = 0; t < in.system.kinds.size(); ++t) {
      SpaceLimits fewer;
      for (const auto& k : in.system.kinds) fewer.max_count.push_back(k.count);
      if (fewer.max_count[t] == 0) continue;
      --fewer.max_count[t];
      double p_fewer = kInf, p_full = kInf;
      try {
        p_fewer = solve(CostTables(in.system, *in.model, fewer), {Objective::perf}).period_s;
      } catch (const InfeasibleError&) {
      }
      try {
        p_full = solve(CostTables(in.system, *in.model), {Objective::perf}).period_s;
      } catch (const InfeasibleError&) {
      }
      EXPECT_LE(p_full, p_fewer * (1 + 1e-12)) << "instance " << inst << " kind " << t;
    }
  }
}

TEST(SchedSolver, BalancedKeepsRatioAndEnergyPlanIsCheapest) {
  std::mt19937_64 rng(11);
  for (int inst = 0; inst < 300; ++inst) {
    Instance in = random_instance(rng, 6);
    const CostTables tables(in.system, *in.model);
    Plan perf, energy;
    try {
      perf = solve(tables, {Objective::perf});
    } catch (const InfeasibleError&) {
      continue;
    }
    energy = solve(tables, {Objective::energy});
    for (double r : {0.3, 0.7, 0.9, 1.0}) {
      const Plan bal = solve(tables, {Objective::balanced, r});
      EXPECT_GE(bal.throughput_per_s, r * perf.throughput_per_s * (1 - 1e-9));
      EXPECT_LE(energy.energy_j, bal.energy_j * (1 + 1e-9));
      EXPECT_LE(bal.energy_j, perf.energy_j * (1 + 1e-9));  // perf's plan is a balanced candidate
    }
    EXPECT_LE(energy.energy_j, perf.energy_j * (1 + 1e-9));
    const Plan paper_perf = solve(tables, {Objective::perf}, SolverKind::paper);
    const Plan paper_energy = solve(tables, {Objective::energy}, SolverKind::paper);
    EXPECT_LE(energy.energy_j, paper_perf.energy_j * (1 + 1e-9));
    EXPECT_LE(energy.energy_j, paper_energy.energy_j * (1 + 1e-9));
    for (const auto& p : enumerate_plans(tables)) EXPECT_LE(energy.energy_j, p.energy_j * (1 + 1e-9));
    // The front holds the perf and energy optima and nothing dominated.
    const auto front = pareto_front(tables);
    ASSERT_FALSE(front.empty());
    EXPECT_TRUE(same(front.front().period_s, perf.period_s));
    double e_min = kInf;
    for (const Plan& p : front) e_min = std::min(e_min, p.energy_j);
    EXPECT_TRUE(same(e_min, energy.energy_j));
    for (const Plan& a : front) {
      for (const Plan& b : front) {
        const bool dom = a.period_s <= b.period_s && a.energy_j <= b.energy_j && a.devices_used <= b.devices_used &&
                         (a.period_s < b.period_s || a.energy_j < b.energy_j || a.devices_used < b.devices_used);
        EXPECT_FALSE(dom) << a.mnemonic << " dominates " << b.mnemonic;
      }
    }
  }
}

TEST(SchedSolver, InfeasibleTargetsSayWhichAndByHowMuch) {
  std::mt19937_64 rng(3);
  Instance in = random_instance(rng, 5);
  Plan perf;
  for (;;) {  // first instance on which every kernel has a device kind
    try {
      perf = solve(CostTables(in.system, *in.model), {Objective::perf});
      break;
    } catch (const InfeasibleError&) {
      in = random_instance(rng, 5);
    }
  }
  const CostTables tables(in.system, *in.model);
  ObjectiveSpec q{Objective::qos};
  q.min_throughput_per_s = 2.0 * perf.throughput_per_s;
  try {
    solve(tables, q);
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("min throughput"), std::string::npos) << msg;
    EXPECT_NE(msg.find("short of the target by 50.00%"), std::string::npos) << msg;
  }
  ObjectiveSpec l{Objective::qos};
  l.max_latency_s = 1e-9;
  try {
    solve(tables, l);
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("max latency"), std::string::npos) << e.what();
  }
  EXPECT_THROW(solve(tables, {Objective::balanced, 1.5}), InputError);
}

TEST(SchedSolver, ExplainsEveryStage) {
  std::mt19937_64 rng(5);
  for (int inst = 0; inst < 20; ++inst) {
    Instance in = random_instance(rng, 5);
    Plan p;
    try {
      p = solve(CostTables(in.system, *in.model), {Objective::perf});
    } catch (const InfeasibleError&) {
      continue;
    }
    for (const Stage& s : p.stages) {
      EXPECT_FALSE(s.why.empty());
      // The chosen group is never beaten by its runner-up with everything else fixed.
      if (s.runner_up_score < kInf) {
        EXPECT_GE(s.runner_up_score, p.period_s * (1 - 1e-9)) << s.why;
      }
    }
  }
}

}  // namespace
}  // namespace dype::sched
