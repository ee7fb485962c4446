// The planners from the literature (solvers heft, critical-path, kl, overseer): small chains
// worked by hand from each paper's definitions, and on random instances plans that are valid
// pipelines and never beat the exact optimum, with how often each finds it and by how much it
// misses it otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../test_sched_instances.h"
#include "runtime/model.h"
#include "scheduler/solver.h"

namespace dype::sched {
namespace {

constexpr SolverKind kHeuristics[] = {SolverKind::heft, SolverKind::critical_path, SolverKind::kl,
                                      SolverKind::overseer};
constexpr Objective kObjectives[] = {Objective::perf, Objective::energy, Objective::balanced, Objective::qos};
constexpr double kX = kInf;  // a kind that cannot run the kernel

double score(const Plan& p, Objective o) { return o == Objective::perf ? p.period_s : p.energy_j; }

// Kinds F, G, C, ... with per-kernel times times[kind][kernel] (kX: cannot run it) and counts[kind]
// devices; a range takes the sum of its kernels' times on any number of devices (so more devices
// never help), every hand-off takes `xfer` s on both sides.
CostTables hand_tables(const std::vector<std::vector<double>>& times, const std::vector<int>& counts, double xfer) {
  SystemSpec sys;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    DeviceKindSpec d;
    d.link_bw_bytes_per_s = 1e9;
    d.name = std::string("k") + char('0' + t);
    d.letter = "FGC"[t];
    d.count = counts[t];
    d.power = {.idle_w = 10, .exec_w = 100, .xfer_w = 20};
    sys.kinds.push_back(d);
  }
  const int n = static_cast<int>(times[0].size());
  TableCostModel model(counts, n);
  for (std::size_t t = 0; t < counts.size(); ++t) {
    for (int a = 0; a < n; ++a) {
      double sum = 0;
      for (int b = a; b < n; ++b) {
        sum += times[t][b];
        for (int c = 1; c <= counts[t]; ++c) model.set_compute(a, b, {static_cast<int>(t), c}, sum);
      }
    }
  }
  for (int k = 0; k + 1 < n; ++k)
    for (std::size_t f = 0; f < counts.size(); ++f)
      for (int cf = 1; cf <= counts[f]; ++cf)
        for (std::size_t g = 0; g < counts.size(); ++g)
          for (int cg = 1; cg <= counts[g]; ++cg)
            model.set_transfer(k, {static_cast<int>(f), cf}, {static_cast<int>(g), cg}, xfer);
  return CostTables(sys, model);
}

// "0-1:1G 2-3:1F": each stage's kernels, count and kind letter.
std::string layout(const Plan& p) {
  std::string s;
  for (const Stage& st : p.stages) {
    if (!s.empty()) s += ' ';
    s += std::to_string(st.first) + "-" + std::to_string(st.last) + ":" + std::to_string(st.count) + "FGC"[st.kind];
  }
  return s;
}

Plan perf(const CostTables& t, SolverKind s) { return solve(t, {.objective = Objective::perf}, s); }

TEST(SchedHeuristics, SolverNamesRoundTrip) {
  for (SolverKind s : {SolverKind::exact, SolverKind::paper, SolverKind::milp, SolverKind::milp_split, SolverKind::heft,
                       SolverKind::critical_path, SolverKind::kl, SolverKind::overseer}) {
    EXPECT_EQ(solver_from_string(to_string(s)), s) << to_string(s);
  }
  EXPECT_STREQ(to_string(SolverKind::critical_path), "critical-path");
  try {
    solver_from_string("greedy");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "solver");
    EXPECT_EQ(e.problem(), "unknown solver 'greedy' (exact, paper, milp, milp-split, heft, critical-path, kl, overseer)");
  }
}

// One chain for all four. Kinds F and G with one device each; kernel k takes 2, 6, 1, 3 s on F and
// 4, 2, 5, 2 s on G; every hand-off 1 s.
//   Every plan (period = max over stages of x_in + C + x_out; latency = sum of x_in + C):
//     F alone 12 / 12, G alone 13 / 13;  F[0] G[1-3] 10 / 12, F[0-1] G[2-3] 9 / 16,
//     F[0-2] G[3] 10 / 12;  G[0] F[1-3] 11 / 15, G[0-1] F[2-3] 7 / 11, G[0-2] F[3] 12 / 15.
//   So the least period and the least latency are both G[0-1] F[2-3] (7 s, 11 s).
TEST(SchedHeuristics, HandCheckedFourKernelChainTwoKinds) {
  const CostTables t = hand_tables({{2, 6, 1, 3}, {4, 2, 5, 2}}, {1, 1}, 1.0);
  const Plan exact = perf(t, SolverKind::exact);
  EXPECT_EQ(layout(exact), "0-1:1G 2-3:1F");
  EXPECT_NEAR(exact.period_s, 7.0, 1e-12);

  // HEFT. Mean times w = 3, 4, 3, 2.5, mean hand-off 1, so the upward ranks are
  // rank(3) = 2.5, rank(2) = 3 + 1 + 2.5 = 6.5, rank(1) = 11.5, rank(0) = 15.5: the chain order.
  // EFT: kernel 0 on F 2, on G 4 -> F. Kernel 1: F (extend) 2 + 6 = 8, G 2 + 1 + 2 = 5 -> G, stage
  // starting at 3. Kernel 2: G (extend) 3 + 7 = 10, F has no device left -> G. Kernel 3: G 3 + 9 = 12.
  // Plan F[0] G[1-3]: latency 12, period 1 + 9 = 10. Greedy on kernel 0, it misses G[0-1] F[2-3].
  const Plan heft = perf(t, SolverKind::heft);
  EXPECT_EQ(layout(heft), "0-0:1F 1-3:1G");
  EXPECT_NEAR(heft.latency_s, 12.0, 1e-12);
  EXPECT_NEAR(heft.period_s, 10.0, 1e-12);
  EXPECT_EQ(heft.solver, "heft");
  ASSERT_EQ(heft.passes.size(), 2u);
  EXPECT_EQ(heft.passes[0].work, "4 upward ranks, chain order");
  EXPECT_EQ(heft.passes[1].method, "HEFT");

  // Critical path: downward ranks 3, 7, 10, 12.5; the path is the whole chain. Both kinds hold it;
  // speeds 12.5 / 12 (F) and 12.5 / 13 (G): all on F, period and latency 12.
  const Plan cp = perf(t, SolverKind::critical_path);
  EXPECT_EQ(layout(cp), "0-3:1F");
  EXPECT_NEAR(cp.period_s, 12.0, 1e-12);

  // KL: k = 2 devices, node costs 3, 4, 3, 2.5, C = 12.5, share 6.25, eps 0.625. Midpoints 1.5, 5,
  // 8.5, 11.25 over 6.25 -> blocks [0-1], [2-3]. Block [0-1]: F and G both hold it (the other holds
  // [2-3]); G runs it faster (6 against 8). [2-3] -> F (4). Refinement: kernel 1 to F would load F
  // with 10 (not < 6.25); kernel 2 to G (communication rule) would load G with 11 > 6.25 + 0.625.
  // No move: G[0-1] F[2-3], the optimum.
  const Plan kl = perf(t, SolverKind::kl);
  EXPECT_EQ(layout(kl), "0-1:1G 2-3:1F");
  EXPECT_NEAR(kl.period_s, 7.0, 1e-12);
  ASSERT_EQ(kl.passes.size(), 2u);
  EXPECT_EQ(kl.passes[0].work, "2 devices, C / k 6.25 s, 2 blocks");
  EXPECT_EQ(kl.passes[1].work, "0 moves in 1 pass");

  // OverSeer: the least latency over the list above, G[0-1] F[2-3] (11 s).
  const Plan os = perf(t, SolverKind::overseer);
  EXPECT_EQ(layout(os), "0-1:1G 2-3:1F");
  EXPECT_NEAR(os.latency_s, 11.0, 1e-12);

  // They ignore energy: the same plan for every objective.
  for (SolverKind s : kHeuristics) {
    EXPECT_EQ(layout(solve(t, {.objective = Objective::energy}, s)), layout(perf(t, s))) << to_string(s);
  }
  // A qos target its plan misses is refused, one it meets is answered: period <= 8 s.
  const ObjectiveSpec qos{.objective = Objective::qos, .min_throughput_per_s = 1.0 / 8};
  try {
    solve(t, qos, SolverKind::heft);
    FAIL() << "heft met period <= 8 s";
  } catch (const InfeasibleError& e) {
    EXPECT_EQ(std::string(e.what()), "qos (heft solver): its plan misses the targets: period 10 s > 8 s");
  }
  const Plan kl_qos = solve(t, qos, SolverKind::kl);
  EXPECT_NEAR(kl_qos.period_s, 7.0, 1e-12);
  ASSERT_EQ(kl_qos.passes.size(), 3u);
  EXPECT_EQ(kl_qos.passes[2].name, "qos: the targets");
}

// HEFT picks the count too, and its EFT leaves the chain when another group finishes sooner. F has
// two devices, G one; kernel times F 1, 5, 1 and G 5, 1, 5 (on any count), hand-offs 0.5 s.
//   Kernel 0: 1F 1, 2F 1, 1G 5 -> 1F (first of the tie). Kernel 1: 1F extended 6, 1F (the other
//   device) 1 + 0.5 + 5 = 6.5, 1G 1 + 0.5 + 1 = 2.5 -> G. Kernel 2: G extended 1.5 + 6 = 7.5, 1F
//   2.5 + 0.5 + 1 = 4 -> F. Plan 1F 1G 1F, latency 4, period 0.5 + 1 + 0.5 = 2.
TEST(SchedHeuristics, HeftChoosesGroupsByEarliestFinish) {
  const CostTables t = hand_tables({{1, 5, 1}, {5, 1, 5}}, {2, 1}, 0.5);
  const Plan heft = perf(t, SolverKind::heft);
  EXPECT_EQ(layout(heft), "0-0:1F 1-1:1G 2-2:1F");
  EXPECT_NEAR(heft.latency_s, 4.0, 1e-12);
  EXPECT_NEAR(heft.period_s, 2.0, 1e-12);
  // With one F, the second F stage is not free at kernel 2: G extended (7.5) is the only choice.
  const Plan one = perf(hand_tables({{1, 5, 1}, {5, 1, 5}}, {1, 1}, 0.5), SolverKind::heft);
  EXPECT_EQ(layout(one), "0-0:1F 1-2:1G");
  EXPECT_NEAR(one.latency_s, 7.5, 1e-12);
}

// Critical path when no device holds the whole path. Kinds F, G, C with one device each; times
// F 1, 1, x, x; G 3, 3, 3, x; C x, 4, 4, 4 (x: cannot run); hand-offs 1 s.
//   Node costs (mean over the kinds that run it) 2, 8/3, 3.5, 4. Speeds: F (2 + 8/3) / 2 = 2.33,
//   G (2 + 8/3 + 3.5) / 9 = 0.91, C (8/3 + 3.5 + 4) / 12 = 0.85. From kernel 0 the fastest, F, holds
//   [0-1] (G and C then cover 2 and 3); from 2, G (faster than C) holds [2] (only C runs 3); C [3].
//   F[0-1] G[2] C[3]: stages 2 + 1, 1 + 3 + 1, 1 + 4: period 5, the optimum.
// When C runs kernel 0 too (4 s), C alone holds the whole path and gets it, however slow: period 16.
TEST(SchedHeuristics, CriticalPathDividedAmongTheFastestDevices) {
  const CostTables t = hand_tables({{1, 1, kX, kX}, {3, 3, 3, kX}, {kX, 4, 4, 4}}, {1, 1, 1}, 1.0);
  const Plan cp = perf(t, SolverKind::critical_path);
  EXPECT_EQ(layout(cp), "0-1:1F 2-2:1G 3-3:1C");
  EXPECT_NEAR(cp.period_s, 5.0, 1e-12);
  EXPECT_NEAR(cp.latency_s, 11.0, 1e-12);
  EXPECT_NEAR(perf(t, SolverKind::exact).period_s, 5.0, 1e-12);
  ASSERT_EQ(cp.passes.size(), 2u);
  EXPECT_EQ(cp.passes[1].work, "no group holds the whole path; divided among 3 groups");

  const CostTables whole = hand_tables({{1, 1, kX, kX}, {3, 3, 3, kX}, {4, 4, 4, 4}}, {1, 1, 1}, 1.0);
  const Plan on_c = perf(whole, SolverKind::critical_path);
  EXPECT_EQ(layout(on_c), "0-3:1C");
  EXPECT_NEAR(on_c.period_s, 16.0, 1e-12);
  EXPECT_NEAR(perf(whole, SolverKind::exact).period_s, 5.0, 1e-12);
}

// KL's communication rule at work. F (one device) takes 1 s a kernel, G (one device) 3 s; six
// kernels, hand-offs 1 s.
//   Node costs 2 each, C = 12, k = 2, share 6, eps 0.6; midpoints 1, 3, ..., 11 over 6 -> blocks
//   [0-2], [3-5]. [0-2] -> F (3 s against 9), [3-5] -> G (9 s). Pass 1: kernel 2 to G would load
//   G with 12 (not < 6). Kernel 3, first of G's block, has D = +2 on G and -2 on F: F's load
//   becomes 4 (4 - 6 <= 0.6), G's 6 (6 - 6 <= 0.6): it moves. Kernel 4 to F: G would keep 3
//   (6 - 3 > 0.6), and 3 is not above 6 for the load rule: no move. Pass 2 moves nothing.
//   F[0-3] G[4-5]: period max(4 + 1, 1 + 6) = 7 (from 10 before the move); the optimum is 6
//   (F alone or F[0-4] G[5]), which the share rule keeps KL from reaching.
TEST(SchedHeuristics, KlMovesABoundaryByTheCommunicationRule) {
  const CostTables t = hand_tables({{1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3}}, {1, 1}, 1.0);
  const Plan kl = perf(t, SolverKind::kl);
  EXPECT_EQ(layout(kl), "0-3:1F 4-5:1G");
  EXPECT_NEAR(kl.period_s, 7.0, 1e-12);
  ASSERT_EQ(kl.passes.size(), 2u);
  EXPECT_EQ(kl.passes[0].work, "2 devices, C / k 6 s, 2 blocks");
  EXPECT_NEAR(kl.passes[0].period_s, 10.0, 1e-12);  // F[0-2] G[3-5] before refinement
  EXPECT_EQ(kl.passes[1].work, "1 move in 2 passes");
  EXPECT_NEAR(perf(t, SolverKind::exact).period_s, 6.0, 1e-12);
}

// OverSeer's Eq. 2 keeps a device to one stage. Times F 1, 5, 1 and G 5, 1, 5, hand-offs 0.5 s.
//   One F and one G: Eq. 2 alone would answer F G F (1 + 0.5 + 1 + 0.5 + 1 = 4) with F twice. With
//   the devices in its state: F alone 7, F[0] G[1-2] 7.5, G[0-1] F[2] 7.5, the rest more -> F
//   alone, latency 7. With two F devices F G F is allowed: latency 4.
TEST(SchedHeuristics, OverseerNeverGivesADeviceTwoStages) {
  const Plan one = perf(hand_tables({{1, 5, 1}, {5, 1, 5}}, {1, 1}, 0.5), SolverKind::overseer);
  EXPECT_EQ(layout(one), "0-2:1F");
  EXPECT_NEAR(one.latency_s, 7.0, 1e-12);
  const Plan two = perf(hand_tables({{1, 5, 1}, {5, 1, 5}}, {2, 1}, 0.5), SolverKind::overseer);
  EXPECT_EQ(layout(two), "0-0:1F 1-1:1G 2-2:1F");
  EXPECT_NEAR(two.latency_s, 4.0, 1e-12);
  ASSERT_EQ(two.passes.size(), 1u);
  EXPECT_EQ(two.passes[0].method, "OverSeer DP");
}

// A plan a solver returns: contiguous stages covering every kernel, each on a group that can run
// it, no more devices of a kind than there are.
void expect_valid(const Plan& p, const CostTables& t, const std::string& what) {
  ASSERT_FALSE(p.stages.empty()) << what;
  int next = 0;
  std::vector<int> used(t.num_kinds(), 0);
  for (const Stage& s : p.stages) {
    EXPECT_EQ(s.first, next) << what;
    EXPECT_LE(s.first, s.last) << what;
    ASSERT_GE(s.count, 1) << what;
    ASSERT_LE(s.count, t.max_count(s.kind)) << what;
    EXPECT_LT(t.compute(s.first, s.last, t.kc({s.kind, s.count})), kInf) << what;
    used[s.kind] += s.count;
    next = s.last + 1;
  }
  EXPECT_EQ(next, t.num_kernels()) << what;
  for (int k = 0; k < t.num_kinds(); ++k) EXPECT_LE(used[k], t.max_count(k)) << what;
  EXPECT_LT(p.period_s, kInf) << what;
}

struct Tally {
  int compared = 0, optimal = 0, refused = 0, looser = 0, none = 0;
  double gap_sum = 0, gap_max = 0;
  void add(double gap) {
    ++compared;
    if (gap <= 1e-9) ++optimal;
    gap_sum += gap;
    gap_max = std::max(gap_max, gap);
  }
};

// Every heuristic on `t` for every objective (random caps): valid plans, never better than the
// exact optimum, the same plan whatever the objective; OverSeer's latency the least of all plans.
void check_instance(const CostTables& t, std::mt19937_64& rng, const std::string& inst, Tally tally[4][4]) {
  const auto all = enumerate_plans(t);
  double least_latency = kInf;
  for (const auto& p : all) least_latency = std::min(least_latency, p.latency_s);
  for (int oi = 0; oi < 4; ++oi) {
    const Objective o = kObjectives[oi];
    const ObjectiveSpec spec = random_objective(o, all, rng);
    Plan exact;
    bool exact_ok = true;
    try {
      exact = solve(t, spec, SolverKind::exact);
    } catch (const InfeasibleError&) {
      exact_ok = false;
    }
    for (int hi = 0; hi < 4; ++hi) {
      const SolverKind h = kHeuristics[hi];
      const std::string what = inst + " " + to_string(h) + " " + to_string(o);
      Plan p;
      try {
        p = solve(t, spec, h);
      } catch (const InfeasibleError&) {
        if (!exact_ok) {
          ++tally[hi][oi].none;  // no plan exists (or none meets the qos targets)
          continue;
        }
        // Without targets the look-ahead always finds a plan when one exists; qos targets its one
        // plan misses are refused.
        EXPECT_EQ(o, Objective::qos) << what << ": no plan, the exact solver found " << exact.mnemonic;
        ++tally[hi][oi].refused;
        continue;
      }
      expect_valid(p, t, what);
      EXPECT_EQ(p.solver, to_string(h));
      ASSERT_TRUE(exact_ok) << what << ": a plan where the exact solver found none";
      EXPECT_GE(p.latency_s, least_latency * (1 - 1e-9)) << what;
      if (h == SolverKind::overseer) {
        EXPECT_NEAR(p.latency_s, least_latency, 1e-9 * least_latency) << what;
      }
      // The same stages whatever the objective (energy is not looked at).
      if (o != Objective::perf) {
        EXPECT_EQ(p.mnemonic, solve(t, {.objective = Objective::perf}, h).mnemonic) << what;
      }
      if (o == Objective::qos) {
        if (spec.min_throughput_per_s > 0) {
          EXPECT_TRUE(within(p.period_s, 1.0 / spec.min_throughput_per_s)) << what;
        }
        EXPECT_TRUE(within(p.latency_s, spec.max_latency_s)) << what;
      }
      if (o == Objective::balanced) {
        // Its cap comes from its own period, looser than the exact one: the optimum under that cap
        // is what it must not beat; against the balanced optimum only when it meets the true cap.
        const ObjectiveSpec same_cap{.objective = Objective::qos,
                                     .min_throughput_per_s = spec.balance_ratio / p.period_s};
        const Plan under = solve(t, same_cap, SolverKind::exact);
        EXPECT_GE(p.energy_j, under.energy_j * (1 - 1e-9)) << what;
        if (!within(p.period_s, solve(t, {.objective = Objective::perf}).period_s / spec.balance_ratio)) {
          ++tally[hi][oi].looser;
          continue;
        }
      }
      const double gap = score(p, o) / score(exact, o) - 1.0;
      EXPECT_GE(gap, -1e-9) << what << ": " << score(p, o) << " (" << p.mnemonic << ") beats the optimum "
                            << score(exact, o) << " (" << exact.mnemonic << ")";
      tally[hi][oi].add(std::max(gap, 0.0));
    }
  }
}

void report(const char* title, Tally tally[4][4]) {
  std::printf("%s (measured):\n", title);
  for (int hi = 0; hi < 4; ++hi) {
    std::printf("  %-13s", to_string(kHeuristics[hi]));
    for (int oi = 0; oi < 4; ++oi) {
      const Tally& x = tally[hi][oi];
      std::printf("  %s %d/%d opt, gap mean %.1f%% max %.0f%%", to_string(kObjectives[oi]), x.optimal, x.compared,
                  x.compared ? 100 * x.gap_sum / x.compared : 0.0, 100 * x.gap_max);
      if (x.refused) std::printf(" (%d refused)", x.refused);
      if (x.none) std::printf(" (%d with no plan)", x.none);
      if (x.looser) std::printf(" (%d over the true cap)", x.looser);
      std::printf(";");
    }
    std::printf("\n");
  }
}

TEST(SchedHeuristics, ValidAndNeverBetterThanTheOptimumOnRandomInstances) {
  std::mt19937_64 rng(1970);
  Tally tally[4][4] = {};
  constexpr int kInstances = 1500;
  for (int inst = 0; inst < kInstances; ++inst) {
    Instance in = random_instance(rng, 6, inst % 2 == 1);
    const CostTables t(in.system, *in.model);
    check_instance(t, rng, "instance " + std::to_string(inst), tally);
    if (::testing::Test::HasFatalFailure()) return;
  }
  report("heuristics against the exact optimum, 1500 random instances of 1 to 6 kernels (a sixth have one)", tally);
  // Sanity of the comparison itself: most perf solves compared, and OverSeer (least latency) and KL
  // (balanced loads) each find the perf optimum now and then.
  EXPECT_GT(tally[0][0].compared, kInstances * 8 / 10);
  EXPECT_GT(tally[3][0].optimal, 0);
  EXPECT_GT(tally[2][0].optimal, 0);
}

TEST(SchedHeuristics, ValidAndNeverBetterWithSidedAndOverlappingTransfers) {
  std::mt19937_64 rng(77);
  Tally tally[4][4] = {};
  for (int inst = 0; inst < 400; ++inst) {
    Instance in = random_instance(rng, 6, inst % 2 == 1);
    in.system.transfers = TransferMode::overlap;
    const OverlapModel model(in, rng);
    const CostTables t(in.system, model.copies);
    check_instance(t, rng, "overlap instance " + std::to_string(inst), tally);
    if (::testing::Test::HasFatalFailure()) return;
  }
  report("with sided and overlapping transfers, 400 random instances", tally);
}

// The paper's models on the paper's testbed (2 GPUs, 3 FPGAs): the GCN's 4 kernels and the
// transformer's 160, as dype-schedule plans them. Valid, never faster than the exact plan, quick.
TEST(SchedHeuristics, PaperModelsOnThePaperTestbed) {
  const std::string models = std::string(DYPE_SOURCE_DIR) + "/configs/models/";
  const SystemSpec sys = paper_testbed();
  const Workload gcn = build_workload(load_model_config(models + "gcn.yaml"),
                                      {.nodes = 2449029, .nnz = 61859140, .feature_len = 100});
  const Workload tf = build_workload(load_model_config(models + "swin-transformer.yaml"),
                                     {.seq_len = 8192, .window = 1024});
  for (const Workload* wl : {&gcn, &tf}) {
    const AdditiveCostModel model = AdditiveCostModel::from_gflops(sys, *wl);
    const CostTables t(sys, model);
    const Plan exact = perf(t, SolverKind::exact);
    std::printf("%d kernels: exact %s %.4g ms (%.3g ms to solve)", t.num_kernels(), exact.mnemonic.c_str(),
                exact.period_s * 1e3, exact.solve_time_s * 1e3);
    for (SolverKind h : kHeuristics) {
      const Plan p = perf(t, h);
      expect_valid(p, t, to_string(h));
      EXPECT_GE(p.period_s, exact.period_s * (1 - 1e-9)) << to_string(h);
      EXPECT_LT(p.solve_time_s, 1.0) << to_string(h);
      std::printf("; %s %s %.4g ms (%.3g ms)", to_string(h), p.mnemonic.c_str(), p.period_s * 1e3,
                  p.solve_time_s * 1e3);
    }
    std::printf(" (modelled)\n");
  }
}

}  // namespace
}  // namespace dype::sched
