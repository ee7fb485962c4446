// Layer-recurrent plans: the folded cost model by hand, and solve_shapes() against a brute force
// over every shape and end pair on random instances, for every objective and both solvers' use.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "scheduler/recurrent.h"

namespace dype::sched {
namespace {

using kernels::OpKind;

bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

TEST(SchedRecurrent, ShapesAreTheDivisorsOfTheLayerCount) {
  const std::vector<OpKind> gcn6(12, OpKind::gemm);
  std::vector<OpKind> ops;
  for (int l = 0; l < 6; ++l) ops.insert(ops.end(), {OpKind::spmm, OpKind::gemm});
  const auto shapes = recurrent_shapes(ops, 6);
  ASSERT_EQ(shapes.size(), 3u);  // 1, 2 and 3 layers a round
  EXPECT_EQ(shapes[0].rounds, 6);
  EXPECT_EQ(shapes[0].round_kernels, 2);
  EXPECT_EQ(shapes[1].rounds, 3);
  EXPECT_EQ(shapes[1].round_kernels, 4);
  EXPECT_EQ(shapes[2].rounds, 2);
  EXPECT_EQ(shapes[2].round_kernels, 6);
  EXPECT_TRUE(recurrent_shapes(ops, 1).empty());
  ops[5] = OpKind::layer_norm;  // layer 2 differs: not recurrent
  EXPECT_TRUE(recurrent_shapes(ops, 6).empty());
  EXPECT_TRUE(recurrent_shapes(gcn6, 5).empty());  // 12 kernels are not 5 equal layers
}

// Two kinds (F, G) with one device each, two layers of one kernel: the F-then-G recurrent plan
// is priced by hand from the formulas in recurrent.h.
TEST(SchedRecurrent, HandCheckedTwoStagePlan) {
  SystemSpec sys;
  sys.kinds = {{.name = "fpga", .letter = 'F', .count = 1, .power = {10, 50, 20}, .link_bw_bytes_per_s = 1e9},
               {.name = "gpu", .letter = 'G', .count = 1, .power = {40, 300, 60}, .link_bw_bytes_per_s = 1e9}};
  // Kernels: a0 b0 a1 b1 (layer = a, b); a runs 1 s on F, 4 s on G; b 3 s on F, 1 s on G.
  TableCostModel m({1, 1}, 4);
  const double t_f[] = {1, 3, 1, 3}, t_g[] = {4, 1, 4, 1};
  for (int a = 0; a < 4; ++a) {
    double f = 0, g = 0;
    for (int b = a; b < 4; ++b) {
      f += t_f[b];
      g += t_g[b];
      m.set_compute(a, b, {0, 1}, f);
      m.set_compute(a, b, {1, 1}, g);
    }
  }
  for (int k = 0; k < 3; ++k) {
    m.set_transfer(k, {0, 1}, {1, 1}, 0.25);  // F -> G
    m.set_transfer(k, {1, 1}, {0, 1}, 0.5);   // G -> F
  }
  const Shape shape{2, 2};
  const Plan p = evaluate_recurrent({{0, 0, 0}, {1, 1, 1}}, sys, m, shape);
  // C_F = 1 + 1, C_G = 1 + 1; X (F -> G after a) = 0.25 twice; H (G -> F after b0) = 0.5 once.
  EXPECT_EQ(p.mnemonic, "(1F1G)x2");
  EXPECT_DOUBLE_EQ(p.stages[0].time_s(), 0.5 + 2 + 0.5);
  EXPECT_DOUBLE_EQ(p.stages[1].time_s(), 0.5 + 2 + 0.5);
  EXPECT_DOUBLE_EQ(p.period_s, 3.0);
  EXPECT_DOUBLE_EQ(p.latency_s, 0.5 + 2 + 0.5 + 2);
  const double e = 1 * (50 * 2 + 20 * 1.0) + 1 * (300 * 2 + 60 * 1.0);  // both busy for the whole period
  EXPECT_DOUBLE_EQ(p.energy_j, e);
  // The flat optimum on one device of each kind: F runs a0 b0 a1 b1 in 8 s, G in 10 s; two
  // stages F|G split at best 4 | 2 + transfer. The recurrent plan's 3 s beats all of them.
  const Plan best = solve_shapes(sys, m, {shape}, {.objective = Objective::perf});
  EXPECT_EQ(best.mnemonic, "(1F1G)x2");
  EXPECT_EQ(best.rounds, 2);
  EXPECT_DOUBLE_EQ(best.period_s, 3.0);
  const Plan flat = solve_shapes(sys, m, {}, {.objective = Objective::perf});
  EXPECT_EQ(flat.rounds, 1);
  EXPECT_GT(flat.period_s, 3.0);
}

struct Instance {
  SystemSpec system;
  std::unique_ptr<TableCostModel> model;
  int layers = 1;
  int per_layer = 1;
};

// layers x per_layer kernels (at most 6), up to 3 kinds of up to 2 devices; kernel times differ
// per layer (so rounds are priced apart), multi-device stages sub-additive with overheads,
// transfers random per boundary and group pair.
Instance random_instance(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto logu = [&](double lo, double hi) { return lo * std::pow(hi / lo, u01(rng)); };
  Instance in;
  in.layers = std::uniform_int_distribution<int>(2, 3)(rng);
  in.per_layer = std::uniform_int_distribution<int>(1, 2)(rng);
  const int n = in.layers * in.per_layer;
  const int kinds = std::uniform_int_distribution<int>(1, 3)(rng);
  std::vector<int> counts;
  for (int t = 0; t < kinds; ++t) {
    DeviceKindSpec d;
    d.name = std::string("k") + char('0' + t);
    d.letter = "FGC"[t];
    d.count = std::uniform_int_distribution<int>(1, 2)(rng);
    d.power.idle_w = logu(5, 60);
    d.power.exec_w = d.power.idle_w + logu(1, 300);
    d.power.xfer_w = d.power.idle_w + logu(0.5, 100);
    d.link_bw_bytes_per_s = 1e9;
    in.system.kinds.push_back(d);
    counts.push_back(d.count);
  }
  in.model = std::make_unique<TableCostModel>(counts, n);
  std::vector<std::vector<double>> base(n, std::vector<double>(kinds));
  for (int k = 0; k < n; ++k) {
    for (int t = 0; t < kinds; ++t) {
      // The same op on the same kind is supported in every layer or in none.
      const bool unsupported = k >= in.per_layer ? !(base[k % in.per_layer][t] < kInf) : u01(rng) < 0.15;
      base[k][t] = unsupported ? kInf : logu(0.1, 10);
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int t = 0; t < kinds; ++t) {
      double sum = 0;
      for (int b = a; b < n; ++b) {
        sum += base[b][t];
        for (int c = 1; c <= counts[t]; ++c) {
          const double t_c = c == 1 ? sum : sum / (c * (0.6 + 0.4 * u01(rng))) + (c - 1) * logu(0.01, 2);
          in.model->set_compute(a, b, {t, c}, t_c);
        }
      }
    }
  }
  for (int k = 0; k + 1 < n; ++k)
    for (int t = 0; t < kinds; ++t)
      for (int c = 1; c <= counts[t]; ++c)
        for (int t2 = 0; t2 < kinds; ++t2)
          for (int c2 = 1; c2 <= counts[t2]; ++c2)
            in.model->set_transfer(k, {t, c}, {t2, c2}, u01(rng) < 0.1 ? 0.0 : logu(0.01, 5));
  return in;
}

double score(double period, double energy, Objective o) { return o == Objective::perf ? period : energy; }

TEST(SchedRecurrent, ExactMatchesBruteForceOverShapesAndEndPairs) {
  std::mt19937_64 rng(20261125);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const Objective objs[] = {Objective::perf, Objective::energy, Objective::balanced, Objective::qos};
  int checked = 0, recurrent_wins = 0, infeasible = 0;
  for (int inst = 0; inst < 600; ++inst) {
    Instance in = random_instance(rng);
    std::vector<OpKind> ops(static_cast<std::size_t>(in.layers * in.per_layer), OpKind::gemm);
    const auto shapes = recurrent_shapes(ops, in.layers);
    ASSERT_FALSE(shapes.empty());
    const auto all = enumerate_shape_plans(in.system, *in.model, shapes);
    std::vector<EnumeratedPlan> plans;
    double p_min = kInf, l_min = kInf;
    for (const auto& p : all) {
      plans.push_back(p.plan);
      p_min = std::min(p_min, p.plan.period_s);
      l_min = std::min(l_min, p.plan.latency_s);
    }
    for (Objective o : objs) {
      ObjectiveSpec spec{.objective = o, .balance_ratio = 0.3 + 0.7 * u01(rng)};
      if (o == Objective::qos && p_min < kInf) {
        if (u01(rng) < 0.8) spec.min_throughput_per_s = (1.0 / p_min) * (0.4 + 0.7 * u01(rng));
        if (u01(rng) < 0.6) spec.max_latency_s = l_min * (0.9 + 1.5 * u01(rng));
      }
      const EnumeratedPlan want = best_of(plans, spec);
      const double want_score = score(want.period_s, want.energy_j, o);
      if (!(want_score < kInf)) {
        EXPECT_THROW(solve_shapes(in.system, *in.model, shapes, spec), InfeasibleError) << "instance " << inst;
        ++infeasible;
        continue;
      }
      Plan got;
      ASSERT_NO_THROW(got = solve_shapes(in.system, *in.model, shapes, spec)) << "instance " << inst;
      ASSERT_TRUE(same(score(got.period_s, got.energy_j, o), want_score))
          << "instance " << inst << " objective " << to_string(o) << ": solve_shapes " << got.mnemonic << " "
          << score(got.period_s, got.energy_j, o) << " vs brute force " << want_score;
      // The plan's figures are those evaluate_recurrent() gives its stages.
      const Shape shape = got.rounds > 1 ? Shape{got.rounds, got.round_kernels} : Shape{1, in.layers * in.per_layer};
      const CostTables t = got.rounds > 1 ? CostTables(in.system, FoldedCostModel(*in.model, shape))
                                          : CostTables(in.system, *in.model);
      std::vector<StageSpec> st;
      for (const Stage& s : got.stages) st.push_back({s.first, s.last, t.kc({s.kind, s.count})});
      const Plan again = evaluate_recurrent(st, in.system, *in.model, shape);
      EXPECT_TRUE(same(again.period_s, got.period_s) && same(again.energy_j, got.energy_j) &&
                  same(again.latency_s, got.latency_s))
          << "instance " << inst;
      recurrent_wins += got.rounds > 1;
      ++checked;
    }
  }
  std::printf("recurrent brute force: %d solves checked (%d recurrent optima), %d infeasible targets\n", checked,
              recurrent_wins, infeasible);
  EXPECT_GT(recurrent_wins, 50);  // the instances do exercise recurrent optima
}

// The front over shapes holds exactly the brute force's non-dominated (period, energy, devices)
// points.
TEST(SchedRecurrent, ParetoFrontOverShapesMatchesBruteForce) {
  std::mt19937_64 rng(11);
  int points = 0, recurrent = 0;
  for (int inst = 0; inst < 200; ++inst) {
    Instance in = random_instance(rng);
    std::vector<OpKind> ops(static_cast<std::size_t>(in.layers * in.per_layer), OpKind::gemm);
    const auto shapes = recurrent_shapes(ops, in.layers);
    const auto all = enumerate_shape_plans(in.system, *in.model, shapes);
    std::vector<EnumeratedPlan> want;
    for (const auto& a : all) {
      if (!(a.plan.period_s < kInf)) continue;
      bool dominated = false;
      for (const auto& b : all) {
        const auto &x = b.plan, &y = a.plan;
        const bool le = x.period_s <= y.period_s * (1 + 1e-12) && x.energy_j <= y.energy_j * (1 + 1e-12) && x.devices <= y.devices;
        const bool lt = x.period_s < y.period_s * (1 - 1e-12) || x.energy_j < y.energy_j * (1 - 1e-12) || x.devices < y.devices;
        dominated = dominated || (le && lt);
      }
      if (!dominated) want.push_back(a.plan);
    }
    std::vector<Plan> front;
    try {
      front = pareto_front_shapes(in.system, *in.model, shapes);
    } catch (const InfeasibleError&) {
      EXPECT_TRUE(want.empty()) << "instance " << inst;
      continue;
    }
    auto matches = [](double p, double e, int d, double p2, double e2, int d2) { return same(p, p2) && same(e, e2) && d == d2; };
    for (const Plan& f : front) {
      bool found = false;
      for (const auto& w : want) found = found || matches(f.period_s, f.energy_j, f.devices_used, w.period_s, w.energy_j, w.devices);
      EXPECT_TRUE(found) << "instance " << inst << ": " << f.mnemonic << " is not a non-dominated plan";
      recurrent += f.rounds > 1;
      ++points;
    }
    for (const auto& w : want) {
      bool found = false;
      for (const Plan& f : front) found = found || matches(f.period_s, f.energy_j, f.devices_used, w.period_s, w.energy_j, w.devices);
      EXPECT_TRUE(found) << "instance " << inst << ": a non-dominated point is missing from the front";
    }
  }
  std::printf("pareto over shapes: %d front points (%d recurrent)\n", points, recurrent);
  EXPECT_GT(recurrent, 10);
}

TEST(SchedRecurrent, PaperSolverNeverBeatsTheExactOne) {
  std::mt19937_64 rng(7);
  for (int inst = 0; inst < 200; ++inst) {
    Instance in = random_instance(rng);
    std::vector<OpKind> ops(static_cast<std::size_t>(in.layers * in.per_layer), OpKind::gemm);
    const auto shapes = recurrent_shapes(ops, in.layers);
    for (Objective o : {Objective::perf, Objective::energy}) {
      Plan exact, paper;
      try {
        exact = solve_shapes(in.system, *in.model, shapes, {.objective = o});
        paper = solve_shapes(in.system, *in.model, shapes, {.objective = o}, SolverKind::paper);
      } catch (const InfeasibleError&) {
        continue;
      }
      EXPECT_GE(score(paper.period_s, paper.energy_j, o), score(exact.period_s, exact.energy_j, o) * (1 - 1e-9));
    }
  }
}

}  // namespace
}  // namespace dype::sched
