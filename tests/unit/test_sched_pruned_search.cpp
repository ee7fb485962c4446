// The pruned search against the exhaustive one. solve_shapes() skips the solves (flat, and each
// recurrent shape's end pairs) that a bound shows cannot beat the plan it has, and image choice
// tells each assignment's search what it must score to win; both must give exactly the plan the
// search without skipping gives (ShapeSearch::skip = false, every assignment solved in full), on
// random small instances for every objective: recurrent models on 1-3 kinds (serial and
// overlapping transfers, sided hand-offs, the exact and the paper's solver), and systems whose
// FPGAs choose among several images. The bound itself is checked against every plan's figures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hw/system_file.h"
#include "graph/generators.h"
#include "runtime/planning/image_choice.h"
#include "runtime/planning/planning_case.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver/score_bound.h"
#include "../test_sched_instances.h"

namespace dype::sched {
namespace {

// Costs keyed by what a group is (an identity: a device kind, or an FPGA image, and a count), so
// a group prices the same in every system that has it, as an FPGA image does in every assignment.
struct Catalogue {
  int n = 0;           // kernels: layers x per_layer
  int layers = 1, per_layer = 1;
  int ids = 0;
  static constexpr int kMaxCount = 3;
  std::vector<PowerStates> power;                 // [id]
  std::vector<double> compute;                    // [(a * n + b) * ids + id) * kMaxCount + c - 1]
  std::vector<std::pair<double, double>> handoff;  // [((k * ids + f) * kMaxCount + cf - 1) ...]: out, in

  std::size_t c_at(int a, int b, int id, int c) const {
    return ((static_cast<std::size_t>(a) * n + b) * ids + id) * kMaxCount + c - 1;
  }
  std::size_t x_at(int k, int f, int cf, int t, int ct) const {
    const std::size_t g = static_cast<std::size_t>(ids) * kMaxCount;
    return (static_cast<std::size_t>(k) * g + f * kMaxCount + cf - 1) * g + t * kMaxCount + ct - 1;
  }
};

Catalogue random_catalogue(std::mt19937_64& rng, int ids, double unsupported = 0.15) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto logu = [&](double lo, double hi) { return lo * std::pow(hi / lo, u01(rng)); };
  Catalogue cat;
  cat.layers = std::uniform_int_distribution<int>(2, 4)(rng);
  cat.per_layer = std::uniform_int_distribution<int>(1, cat.layers == 4 ? 1 : 2)(rng);
  cat.n = cat.layers * cat.per_layer;
  cat.ids = ids;
  const bool monotone = u01(rng) < 0.5;  // stages never faster with more kernels (ranges_grow)
  for (int id = 0; id < ids; ++id) {
    const double idle = logu(5, 60);
    cat.power.push_back({.idle_w = idle, .exec_w = idle + logu(1, 300), .xfer_w = idle + logu(0.5, 100)});
  }
  std::vector<std::vector<double>> base(cat.n, std::vector<double>(ids));
  for (int k = 0; k < cat.n; ++k)
    for (int id = 0; id < ids; ++id) {
      // The same op on the same identity runs in every layer or in none.
      const bool off = k >= cat.per_layer ? !(base[k % cat.per_layer][id] < kInf) : u01(rng) < unsupported;
      base[k][id] = off ? kInf : logu(0.1, 10);
    }
  std::vector<double> eff(ids * 4), ovh(ids * 4);
  for (int id = 0; id < ids; ++id)
    for (int c = 1; c <= Catalogue::kMaxCount; ++c) eff[id * 4 + c] = 0.6 + 0.4 * u01(rng), ovh[id * 4 + c] = (c - 1) * logu(0.01, 2);
  cat.compute.assign(static_cast<std::size_t>(cat.n) * cat.n * ids * Catalogue::kMaxCount, kInf);
  for (int a = 0; a < cat.n; ++a)
    for (int id = 0; id < ids; ++id) {
      double sum = 0;
      for (int b = a; b < cat.n; ++b) {
        sum += base[b][id];
        for (int c = 1; c <= Catalogue::kMaxCount; ++c) {
          const double e = monotone ? eff[id * 4 + c] : 0.6 + 0.4 * u01(rng);
          const double o = monotone ? ovh[id * 4 + c] : (c - 1) * logu(0.01, 2);
          cat.compute[cat.c_at(a, b, id, c)] = c == 1 ? sum : sum / (c * e) + o;
        }
      }
    }
  const bool sided = u01(rng) < 0.5;
  cat.handoff.resize(static_cast<std::size_t>(std::max(cat.n - 1, 0)) * ids * ids * 9);
  for (int k = 0; k + 1 < cat.n; ++k)
    for (int f = 0; f < ids; ++f)
      for (int cf = 1; cf <= 3; ++cf)
        for (int t = 0; t < ids; ++t)
          for (int ct = 1; ct <= 3; ++ct) {
            const double x = u01(rng) < 0.1 ? 0.0 : logu(0.01, 5);
            const double g = sided ? (u01(rng) < 0.5 ? 0.2 + 0.8 * u01(rng) : 1.0 + 2.0 * u01(rng)) : 1.0;
            cat.handoff[cat.x_at(k, f, cf, t, ct)] = u01(rng) < 0.5 ? std::pair{x * g, x} : std::pair{x, x * g};
          }
  return cat;
}

// A system's kinds priced from the catalogue: kind t is identity id[t].
class CatalogueModel final : public CostModel {
 public:
  CatalogueModel(const Catalogue& cat, std::vector<int> id) : cat_(cat), id_(std::move(id)) {}
  int num_kernels() const override { return cat_.n; }
  double compute_time_s(int a, int b, DeviceGroup g) const override {
    return cat_.compute[cat_.c_at(a, b, id_[g.kind], g.count)];
  }
  double output_bytes(int) const override { return 1e6; }
  double transfer_time_s(int k, DeviceGroup f, DeviceGroup t) const override {
    return std::max(transfer_out_s(k, f, t), transfer_in_s(k, f, t));
  }
  double transfer_out_s(int k, DeviceGroup f, DeviceGroup t) const override { return at(k, f, t).first; }
  double transfer_in_s(int k, DeviceGroup f, DeviceGroup t) const override { return at(k, f, t).second; }

 private:
  const std::pair<double, double>& at(int k, DeviceGroup f, DeviceGroup t) const {
    return cat_.handoff[cat_.x_at(k, id_[f.kind], f.count, id_[t.kind], t.count)];
  }
  const Catalogue& cat_;
  std::vector<int> id_;
};

DeviceKindSpec kind(const std::string& name, char letter, int count, const PowerStates& power) {
  DeviceKindSpec d;
  d.name = name;
  d.letter = letter;
  d.count = count;
  d.power = power;
  d.link_bw_bytes_per_s = 1e9;
  return d;
}

std::vector<Shape> shapes_of(const Catalogue& cat) {
  const std::vector<kernels::OpKind> ops(static_cast<std::size_t>(cat.n), kernels::OpKind::gemm);
  return recurrent_shapes(ops, cat.layers);
}

// Everything a plan says, exactly (doubles to the last bit), its passes and explanations included
// (but the count of solves skipped, in the work of pass 0).
std::string everything(const Plan& p) {
  nlohmann::json j = to_json(p);
  j.erase("solve_time_s");
  std::string s = j.dump();
  for (const SolverPass& pass : p.passes) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "|%d %d %a %a ", pass.number, pass.found ? 1 : 0, pass.period_s, pass.energy_j);
    s += buf + pass.name + " " + pass.method + " " + (pass.number == 0 ? pass.work.substr(0, pass.work.find(';')) : pass.work);
  }
  return s;
}

// How many solves a recurrent search skipped (pass 0's work: "flat, x2; 26 solves, 20 skipped by
// their bounds").
int skipped(const Plan& p) {
  if (p.passes.empty() || p.passes.front().number != 0) return 0;
  const std::string& w = p.passes.front().work;
  const auto at = w.find(" solves, ");
  return at == std::string::npos ? 0 : std::stoi(w.substr(at + 9));
}

// The plan, or the InfeasibleError's message.
template <class F>
std::string outcome(F solve) {
  try {
    return everything(solve());
  } catch (const InfeasibleError& e) {
    return std::string("infeasible: ") + e.what();
  }
}

// `o` with random targets around the fastest period and least latency the exhaustive search finds
// (some out of reach on purpose).
ObjectiveSpec random_spec(Objective o, double fastest, double quickest, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  ObjectiveSpec spec{.objective = o, .balance_ratio = 0.3 + 0.7 * u01(rng)};
  if (o == Objective::latency && fastest < kInf && u01(rng) < 0.6)
    spec.min_throughput_per_s = (1.0 / fastest) * (0.4 + 0.7 * u01(rng));
  if (o == Objective::qos && fastest < kInf) {
    if (u01(rng) < 0.8) spec.min_throughput_per_s = (1.0 / fastest) * (0.4 + 0.7 * u01(rng));
    if (u01(rng) < 0.6 && quickest < kInf) spec.max_latency_s = quickest * (0.9 + 1.5 * u01(rng));
  }
  if (o == Objective::qos && !(spec.min_throughput_per_s > 0) && !(spec.max_latency_s < kInf))
    spec.max_latency_s = 1e9;  // qos needs a target
  return spec;
}

constexpr Objective kObjectives[] = {Objective::perf, Objective::energy, Objective::balanced, Objective::qos,
                                     Objective::latency};

double figure(const Plan& p, Objective o) {
  return o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
}

// Random recurrent models on 1-3 kinds of up to 3 devices: the pruned search's plan is the
// exhaustive one's for every objective and both solvers, and with a score limit it is that plan
// whenever it scores within the limit, and otherwise nothing within it.
TEST(SchedPrunedSearch, ShapesMatchTheExhaustiveSearch) {
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int checked = 0, limited = 0, cut = 0, skips = 0;
  for (int inst = 0; inst < 300; ++inst) {
    const int kinds = std::uniform_int_distribution<int>(1, 3)(rng);
    const Catalogue cat = random_catalogue(rng, kinds);
    SystemSpec sys;
    std::vector<int> ids;
    for (int t = 0; t < kinds; ++t) {
      sys.kinds.push_back(kind(std::string("k") + char('0' + t), "FGC"[t], std::uniform_int_distribution<int>(1, 3)(rng),
                               cat.power[static_cast<std::size_t>(t)]));
      ids.push_back(t);
    }
    const CatalogueModel table(cat, ids);
    // A quarter of the instances overlap transfers with copies inside the compute.
    const bool overlap = inst % 4 == 3;
    sys.transfers = overlap ? TransferMode::overlap : TransferMode::serial;
    const CopiesInCompute copies(table, rng());
    const CostModel& model = overlap ? static_cast<const CostModel&>(copies) : table;
    const auto shapes = shapes_of(cat);
    double fastest = kInf, quickest = kInf;
    try {
      fastest = solve_shapes(sys, model, shapes, {.objective = Objective::perf}, SolverKind::exact, {}, {.skip = false}).period_s;
      quickest = solve_shapes(sys, model, shapes, {.objective = Objective::latency}, SolverKind::exact, {}, {.skip = false}).latency_s;
    } catch (const InfeasibleError&) {
    }
    for (const SolverKind solver : {SolverKind::exact, SolverKind::paper}) {
      if (solver == SolverKind::paper && inst % 3 != 0) continue;
      for (const Objective o : kObjectives) {
        const ObjectiveSpec spec = random_spec(o, fastest, quickest, rng);
        const std::string want = outcome([&] { return solve_shapes(sys, model, shapes, spec, solver, {}, {.skip = false}); });
        Plan pruned;
        const std::string got = outcome([&] { return pruned = solve_shapes(sys, model, shapes, spec, solver); });
        ASSERT_EQ(got, want) << "instance " << inst << " " << to_string(o) << " " << to_string(solver);
        ++checked;
        skips += skipped(pruned);
        if (want.rfind("infeasible", 0) == 0) continue;
        // Held to a limit around its own score.
        const Plan full = solve_shapes(sys, model, shapes, spec, solver, {}, {.skip = false});
        const double limit = figure(full, o == Objective::balanced || o == Objective::qos ? Objective::energy : o) *
                             (u01(rng) < 0.5 ? 1.0 : 0.8 + 0.4 * u01(rng));
        const Plan held = solve_shapes(sys, model, shapes, spec, solver, {}, {.score_limit = limit});
        const Objective by = o == Objective::balanced || o == Objective::qos ? Objective::energy : o;
        if (figure(full, by) <= limit) {
          EXPECT_EQ(everything(held), want) << "instance " << inst << " " << to_string(o) << " limit " << limit;
        } else if (!held.empty()) {
          EXPECT_GT(figure(held, by), limit) << "instance " << inst << " " << to_string(o);
        } else {
          ++cut;
        }
        ++limited;
      }
    }
  }
  std::printf("%d searches equal the exhaustive ones (%d solves of end pairs skipped), %d held to a score limit (%d cut "
              "short)\n", checked, skips, limited, cut);
  EXPECT_GT(skips, 0);
  EXPECT_GT(cut, 0);
}

// The bound under every plan: on flat tables and on each shape's tables with every end pair
// pinned, score_lower_bound() is at most each enumerated plan's score, and period_within(p) says
// whether some plan's period is at most p.
TEST(SchedPrunedSearch, BoundsHoldForEveryPlan) {
  std::mt19937_64 rng(77);
  int tables = 0, plans = 0;
  for (int inst = 0; inst < 200; ++inst) {
    const int kinds = std::uniform_int_distribution<int>(1, 3)(rng);
    const Catalogue cat = random_catalogue(rng, kinds);
    SystemSpec sys;
    std::vector<int> ids;
    for (int t = 0; t < kinds; ++t) {
      sys.kinds.push_back(kind(std::string("k") + char('0' + t), "FGC"[t], std::uniform_int_distribution<int>(1, 2)(rng),
                               cat.power[static_cast<std::size_t>(t)]));
      ids.push_back(t);
    }
    const CatalogueModel table(cat, ids);
    const bool overlap = inst % 3 == 2;
    sys.transfers = overlap ? TransferMode::overlap : TransferMode::serial;
    const CopiesInCompute copies(table, rng());
    const CostModel& model = overlap ? static_cast<const CostModel&>(copies) : table;
    const auto check = [&](const CostTables& t) {
      std::vector<EnumeratedPlan> all;
      for (auto& p : enumerate_plans(t))
        if (p.period_s < kInf) all.push_back(std::move(p));  // kInf: cannot run (an end pinned away)
      double least_period = kInf;
      for (const Objective o : {Objective::perf, Objective::energy, Objective::latency}) {
        const double bound = detail::score_lower_bound(t, o);
        for (const auto& p : all) {
          const double s = o == Objective::perf ? p.period_s : o == Objective::latency ? p.latency_s : p.energy_j;
          ASSERT_LE(bound, s * (1 + 1e-12)) << "instance " << inst << " " << to_string(o);
          least_period = std::min(least_period, p.period_s);
          ++plans;
        }
      }
      if (least_period < kInf) {
        EXPECT_TRUE(detail::period_within(t, least_period * (1 + 1e-12))) << "instance " << inst;
        EXPECT_FALSE(detail::period_within(t, least_period * (1 - 1e-9))) << "instance " << inst;
      }
      ++tables;
    };
    check(CostTables(sys, model));
    for (const Shape& s : shapes_of(cat)) {
      const FoldedCostModel folded(model, s);
      CostTables t(sys, folded);
      for (int kf = 0; kf < t.num_kc(); ++kf)
        for (int kl = 0; kl < t.num_kc(); ++kl) {
          std::vector<double> entry(static_cast<std::size_t>(t.num_kc()), kInf), exit = entry;
          entry[static_cast<std::size_t>(kf)] = folded.handoff_in_s(t.group(kl), t.group(kf));
          exit[static_cast<std::size_t>(kl)] = folded.handoff_out_s(t.group(kl), t.group(kf));
          t.set_ends(entry, exit);
          check(t);
        }
    }
  }
  std::printf("%d tables, %d plan scores above their bound\n", tables, plans);
}

// Systems whose FPGAs choose among 2-3 images (each runs some of the ops), beside 0-2 GPUs: every
// assignment is a system with one kind per image, priced alike wherever it has the same group
// (so assignments tie, and ties go to fewer reloads). The choice with limits (choose_images_for
// over solve_shapes with score_limit, as PlanningCase makes it) equals the exhaustive one.
TEST(SchedPrunedSearch, ImageChoiceMatchesTheExhaustiveSearch) {
  std::mt19937_64 rng(4242);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  int checked = 0, won_by_reload = 0, cut = 0;
  for (int inst = 0; inst < 160; ++inst) {
    const int images = std::uniform_int_distribution<int>(2, 3)(rng);
    const int gpus = std::uniform_int_distribution<int>(0, 2)(rng);
    // Identity 0: the GPU; 1..images: the FPGA images (more of them unsupported).
    const Catalogue cat = random_catalogue(rng, images + 1, 0.35);
    rt::FpgaImages fpgas;
    fpgas.devices = std::uniform_int_distribution<int>(1, 3)(rng);
    fpgas.board = "board";
    int left = fpgas.devices;
    for (int i = 0; i < images; ++i) {
      rt::ImageOption opt;
      opt.bitstream.name = "img" + std::to_string(i);
      opt.bitstream.load_time_s = 0.05 + 2.0 * u01(rng);
      opt.loaded = i + 1 == images ? left : std::uniform_int_distribution<int>(0, left)(rng);
      left -= opt.loaded;
      fpgas.options.push_back(opt);
    }
    const auto assignments = rt::image_assignments(fpgas);
    std::vector<SystemSpec> systems;
    std::vector<std::unique_ptr<CatalogueModel>> models;
    for (const auto& a : assignments) {
      SystemSpec sys;
      std::vector<int> ids;
      if (gpus > 0) sys.kinds.push_back(kind("gpu", 'G', gpus, cat.power[0])), ids.push_back(0);
      for (int i = 0; i < images; ++i) {
        if (a[static_cast<std::size_t>(i)] == 0) continue;
        sys.kinds.push_back(kind("fpga:img" + std::to_string(i), 'F', a[static_cast<std::size_t>(i)],
                                 cat.power[static_cast<std::size_t>(i) + 1]));
        ids.push_back(i + 1);
      }
      systems.push_back(sys);
      models.push_back(std::make_unique<CatalogueModel>(cat, ids));
    }
    const auto shapes = shapes_of(cat);
    const double p_exec = 10 + 90 * u01(rng);
    const auto exhaustive = [&](std::size_t i, const ObjectiveSpec& o, double) -> std::optional<Plan> {
      return solve_shapes(systems[i], *models[i], shapes, o, SolverKind::exact, {}, {.skip = false});
    };
    const auto pruned = [&](std::size_t i, const ObjectiveSpec& o, double limit) -> std::optional<Plan> {
      Plan p = solve_shapes(systems[i], *models[i], shapes, o, SolverKind::exact, {}, {.score_limit = limit});
      if (p.empty()) {
        ++cut;
        return std::nullopt;
      }
      return p;
    };
    // Targets from the fastest period and least latency over every assignment.
    double fastest = kInf, quickest = kInf;
    for (std::size_t i = 0; i < assignments.size(); ++i) {
      try {
        fastest = std::min(fastest, exhaustive(i, {.objective = Objective::perf}, kInf)->period_s);
        quickest = std::min(quickest, exhaustive(i, {.objective = Objective::latency}, kInf)->latency_s);
      } catch (const InfeasibleError&) {
      }
    }
    for (const double horizon : {1.0, 1e3, 1e7}) {
      for (const Objective o : kObjectives) {
        const ObjectiveSpec spec = random_spec(o, fastest, quickest, rng);
        const auto choose = [&](const rt::AssignmentSolve& solve) {
          try {
            const rt::ImageChoice c = rt::choose_images_for(fpgas, assignments, solve, spec, horizon, p_exec);
            char buf[64];
            std::snprintf(buf, sizeof buf, "assignment %zu score %a reloads %d: ", c.index, c.score, c.cost.reloads);
            return buf + everything(c.plan);
          } catch (const InfeasibleError& e) {
            return std::string("infeasible: ") + e.what();
          }
        };
        const std::string want = choose(exhaustive);
        ASSERT_EQ(choose(pruned), want) << "instance " << inst << " " << to_string(o) << " horizon " << horizon;
        won_by_reload += want.find("reloads 0:") == std::string::npos && want.rfind("assignment", 0) == 0;
        ++checked;
      }
    }
  }
  std::printf("%d image choices equal the exhaustive search's (%d reload an FPGA; %d assignments cut short)\n", checked,
              won_by_reload, cut);
  EXPECT_GT(won_by_reload, 0);
  EXPECT_GT(cut, 0);
}

// dype-schedule's planning (PlanningCase: the runtime cost model, every image assignment of the
// paper testbeds' U280s, the recurrent shapes) against the same choice over exhaustive searches,
// for GCN and GIN on the paper's datasets and every objective.
TEST(SchedPrunedSearch, PaperTestbedsMatchTheExhaustiveSearch) {
  std::mt19937_64 rng(9);
  int checked = 0;
  for (const char* system : {"paper-testbed-pcie4.yaml", "paper-testbed-pcie5.yaml", "paper-testbed-cxl3.yaml"}) {
    const std::string file = std::string(DYPE_SOURCE_DIR) + "/configs/systems/" + system;
    const rt::FpgaImages images = rt::candidate_images(hw::load_system_config(file));
    const auto assignments = rt::image_assignments(images);
    ASSERT_GT(assignments.size(), 1u) << system;
    for (const char* model : {"gcn.yaml", "gin.yaml"}) {
      for (const auto d : {kernels::PaperDataset::s1, kernels::PaperDataset::s2, kernels::PaperDataset::s3,
                           kernels::PaperDataset::s4}) {
        const kernels::GraphShape g = kernels::paper_shape(d);
        const rt::PlanningCase c({.system_file = file,
                                  .model = load_model_config(std::string(DYPE_SOURCE_DIR) + "/configs/models/" + model),
                                  .input = {.nodes = g.nodes, .nnz = g.edges, .feature_len = g.feature_len},
                                  .perfmodels_dir = std::string(DYPE_SOURCE_DIR) + "/configs/perfmodels",
                                  .transfers = std::nullopt});
        ASSERT_EQ(c.assignments(), assignments.size());
        const auto exhaustive = [&](std::size_t i, const ObjectiveSpec& o, double) -> std::optional<Plan> {
          const rt::ScheduleInputs& si = c.inputs(i);
          return solve_shapes(si.system, *si.model, c.shapes(), o, SolverKind::exact, coordinator_recurrence(si.system),
                              {.skip = false});
        };
        const SystemSpec& sys = c.loaded().system;
        const double p_exec = sys.kinds[static_cast<std::size_t>(sys.kind_index("fpga"))].power.exec_w;
        double fastest = kInf, quickest = kInf;
        for (std::size_t i = 0; i < assignments.size(); ++i) {
          fastest = std::min(fastest, exhaustive(i, {.objective = Objective::perf}, kInf)->period_s);
          quickest = std::min(quickest, exhaustive(i, {.objective = Objective::latency}, kInf)->latency_s);
        }
        for (const Objective o : kObjectives) {
          const ObjectiveSpec spec = random_spec(o, fastest, quickest, rng);
          std::string want, got;
          try {
            const rt::ImageChoice w = rt::choose_images_for(images, assignments, exhaustive, spec, 1000, p_exec);
            want = std::to_string(w.index) + " " + everything(w.plan);
          } catch (const InfeasibleError&) {
            want = "infeasible";
          }
          try {
            const rt::CasePlan p = c.plan(spec);
            Plan plan = p.plan;
            plan.objective = to_string(o == Objective::balanced ? Objective::qos : o);  // as choose_images_for's
            got = std::to_string(p.assignment) + " " + everything(plan);
          } catch (const InfeasibleError&) {
            got = "infeasible";
          }
          EXPECT_EQ(got, want) << system << " " << model << " " << g.name << " " << to_string(o);
          ++checked;
        }
      }
    }
  }
  std::printf("%d PlanningCase plans equal the exhaustive search's\n", checked);
}

}  // namespace
}  // namespace dype::sched
