// Layer-recurrent solves (recurrent.h): the flat chain and every recurrent shape, each shape once
// per (first group, last group) pair with the hand-off pinned to the ends, the best kept.
#include "scheduler/recurrent.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "scheduler/solver/dispatch.h"
#include "scheduler/solver/exact.h"
#include "scheduler/solver/explain.h"
#include "scheduler/solver/format.h"
#include "scheduler/solver/objective.h"
#include "scheduler/solver/paper.h"

namespace dype::sched {

std::vector<Shape> recurrent_shapes(const std::vector<kernels::OpKind>& ops, int layers) {
  std::vector<Shape> out;
  const int n = static_cast<int>(ops.size());
  if (layers < 2 || n % layers != 0) return out;
  const int per_layer = n / layers;
  for (int i = per_layer; i < n; ++i) {
    if (ops[static_cast<std::size_t>(i)] != ops[static_cast<std::size_t>(i % per_layer)]) return out;
  }
  for (int g = 1; g < layers; ++g) {
    if (layers % g == 0) out.push_back({layers / g, g * per_layer});
  }
  return out;
}

std::vector<Shape> recurrent_shapes(const Workload& workload) {
  if (workload.kernels.empty()) return {};
  std::vector<kernels::OpKind> ops;
  for (const Kernel& k : workload.kernels) ops.push_back(k.shape.kind);
  return recurrent_shapes(ops, workload.kernels.back().layer + 1);
}

namespace {

// A range figure of the base model summed over every round (kernel k of the round stands for
// k + r m).
using RangeFigure = double (CostModel::*)(int, int, DeviceGroup) const;
double every_round(const CostModel& base, const Shape& shape, RangeFigure f, int first, int last, DeviceGroup g) {
  double t = 0.0;
  for (int r = 0; r < shape.rounds; ++r) t += (base.*f)(first + r * shape.round_kernels, last + r * shape.round_kernels, g);
  return t;
}

}  // namespace

FoldedCostModel::FoldedCostModel(const CostModel& base, Shape shape) : base_(base), shape_(shape) {
  if (shape.rounds < 1 || shape.round_kernels < 1 || shape.rounds * shape.round_kernels != base.num_kernels()) {
    throw Error("FoldedCostModel: " + std::to_string(shape.rounds) + " rounds of " +
                std::to_string(shape.round_kernels) + " kernels do not make the chain's " +
                std::to_string(base.num_kernels()));
  }
}

double FoldedCostModel::compute_time_s(int first, int last, DeviceGroup group) const {
  double t = 0.0;
  for (int r = 0; r < shape_.rounds; ++r) {
    const double c = base_.compute_time_s(first + r * shape_.round_kernels, last + r * shape_.round_kernels, group);
    if (!(c < kInf) || c < 0) return kInf;
    t += c;
  }
  return t;
}

double FoldedCostModel::copy_time_s(int first, int last, DeviceGroup group) const {
  return every_round(base_, shape_, &CostModel::copy_time_s, first, last, group);
}

double FoldedCostModel::waited_copy_time_s(int first, int last, DeviceGroup group) const {
  return every_round(base_, shape_, &CostModel::waited_copy_time_s, first, last, group);
}

double FoldedCostModel::copy_in_time_s(int first, int last, DeviceGroup group) const {
  return every_round(base_, shape_, &CostModel::copy_in_time_s, first, last, group);
}

double FoldedCostModel::copy_out_time_s(int first, int last, DeviceGroup group) const {
  return every_round(base_, shape_, &CostModel::copy_out_time_s, first, last, group);
}

double FoldedCostModel::transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const {
  double t = 0.0;
  for (int r = 0; r < shape_.rounds; ++r) t += base_.transfer_time_s(k + r * shape_.round_kernels, from, to);
  return t;
}

double FoldedCostModel::transfer_out_s(int k, DeviceGroup from, DeviceGroup to) const {
  double t = 0.0;
  for (int r = 0; r < shape_.rounds; ++r) t += base_.transfer_out_s(k + r * shape_.round_kernels, from, to);
  return t;
}

double FoldedCostModel::transfer_in_s(int k, DeviceGroup from, DeviceGroup to) const {
  double t = 0.0;
  for (int r = 0; r < shape_.rounds; ++r) t += base_.transfer_in_s(k + r * shape_.round_kernels, from, to);
  return t;
}

CostModel::Sides FoldedCostModel::transfer_sides(int k, DeviceGroup from, DeviceGroup to) const {
  Sides t;
  for (int r = 0; r < shape_.rounds; ++r) {
    const Sides x = base_.transfer_sides(k + r * shape_.round_kernels, from, to);
    t.out_s += x.out_s;
    t.in_s += x.in_s;
  }
  return t;
}

Footprint FoldedCostModel::footprint(int first, int last, DeviceGroup group) const {
  Footprint f;
  for (int r = 0; r < shape_.rounds; ++r)
    f.add(base_.footprint(first + r * shape_.round_kernels, last + r * shape_.round_kernels, group));
  return f;
}

double FoldedCostModel::execute_w(int first, int last, DeviceGroup group) const {
  double energy = 0.0, time = 0.0;
  for (int r = 0; r < shape_.rounds; ++r) {
    const int a = first + r * shape_.round_kernels, b = last + r * shape_.round_kernels;
    const double w = base_.execute_w(a, b, group);
    if (w < 0) return -1.0;
    const double c = base_.compute_time_s(a, b, group);
    if (!(c < kInf)) return -1.0;
    energy += w * c;
    time += c;
  }
  return time > 0 ? energy / time : -1.0;
}

double FoldedCostModel::handoff_out_s(DeviceGroup from, DeviceGroup to) const {
  double t = 0.0;
  for (int r = 1; r < shape_.rounds; ++r) t += base_.transfer_out_s(r * shape_.round_kernels - 1, from, to);
  return t;
}

double FoldedCostModel::handoff_in_s(DeviceGroup from, DeviceGroup to) const {
  double t = 0.0;
  for (int r = 1; r < shape_.rounds; ++r) t += base_.transfer_in_s(r * shape_.round_kernels - 1, from, to);
  return t;
}

CostModel::Sides FoldedCostModel::handoff_sides(DeviceGroup from, DeviceGroup to) const {
  Sides t;
  for (int r = 1; r < shape_.rounds; ++r) {
    const Sides x = base_.transfer_sides(r * shape_.round_kernels - 1, from, to);
    t.out_s += x.out_s;
    t.in_s += x.in_s;
  }
  return t;
}

namespace {

// The round's allowed kinds: kernel k of the round may run on a kind when every round's allows it.
SpaceLimits fold_limits(const SpaceLimits& limits, Shape shape) {
  SpaceLimits out;
  out.max_count = limits.max_count;
  if (limits.allowed_kinds.empty() && limits.recurrent_kinds == ~0u) return out;
  out.allowed_kinds.assign(static_cast<std::size_t>(shape.round_kernels), limits.recurrent_kinds);
  for (std::size_t k = 0; k < limits.allowed_kinds.size(); ++k)
    out.allowed_kinds[k % static_cast<std::size_t>(shape.round_kernels)] &= limits.allowed_kinds[k];
  return out;
}

// Pins the ends of `t` to the pair (kf first, kl last) with the hand-off H(kl -> kf): its
// receiving side on the first stage, its sending side on the last.
void pin_ends(CostTables& t, const FoldedCostModel& folded, int kf, int kl) {
  std::vector<double> entry(static_cast<std::size_t>(t.num_kc()), kInf), exit = entry;
  const CostModel::Sides h = folded.handoff_sides(t.group(kl), t.group(kf));
  entry[static_cast<std::size_t>(kf)] = h.in_s;
  exit[static_cast<std::size_t>(kl)] = h.out_s;
  t.set_ends(std::move(entry), std::move(exit));
}

// One candidate: the stages, the tables they are priced on (ends pinned), the shape.
struct Candidate {
  detail::Found found;
  Shape shape;
  std::optional<CostTables> tables;  // recurrent: a copy with its ends pinned
  detail::Caps caps;
};

// a better than b for the objective: score, then the other figure, then fewer devices, then the
// simpler shape (flat, then fewer rounds).
bool better(const Candidate& a, const Candidate& b, Objective o) {
  const Figures &x = a.found.fig, &y = b.found.fig;
  const double s1 = detail::score(x, o), s2 = detail::score(y, o);
  const double tol = 1e-12 * std::max(std::abs(s1), std::abs(s2));
  if (s1 < s2 - tol) return true;
  if (s1 > s2 + tol) return false;
  // perf and latency break ties by energy, the energy objectives by period.
  const bool by_energy = o == Objective::perf || o == Objective::latency;
  const double o1 = by_energy ? x.energy : x.period, o2 = by_energy ? y.energy : y.period;
  const double tol2 = 1e-12 * std::max(std::abs(o1), std::abs(o2));
  if (o1 < o2 - tol2) return true;
  if (o1 > o2 + tol2) return false;
  if (x.devices != y.devices) return x.devices < y.devices;
  return a.shape.rounds < b.shape.rounds;
}

detail::Found run(const CostTables& t, const ObjectiveSpec& o, SolverKind solver, detail::Caps& caps,
                  detail::PassLog* log = nullptr) {
  return detail::run_solver(t, o, solver, caps, log);
}

// Runs `o` on the flat tables and every shape's end pairs; calls keep() with each plan found.
// InfeasibleErrors (qos targets) are skipped; the first one is returned when nothing was found.
template <class Keep>
std::optional<InfeasibleError> each_solve(const CostTables& flat, const std::vector<CostTables>& folded_tables,
                                          const std::vector<FoldedCostModel>& folded, const std::vector<Shape>& shapes,
                                          const ObjectiveSpec& o, SolverKind solver, Keep keep) {
  std::optional<InfeasibleError> first_error;
  auto attempt = [&](const CostTables& t, Shape shape) {
    detail::Caps caps;
    try {
      detail::Found f = run(t, o, solver, caps);
      if (f.ok) keep(std::move(f), shape, t, caps);
    } catch (const InfeasibleError& e) {
      if (!first_error) first_error = e;
    }
  };
  attempt(flat, {1, flat.num_kernels()});
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    CostTables t = folded_tables[i];
    for (int kf = 0; kf < t.num_kc(); ++kf) {
      for (int kl = 0; kl < t.num_kc(); ++kl) {
        pin_ends(t, folded[i], kf, kl);
        attempt(t, shapes[i]);
      }
    }
  }
  return first_error;
}

}  // namespace

SpaceLimits coordinator_recurrence(const SystemSpec& system) {
  SpaceLimits l;
  for (std::size_t t = 0; t < system.kinds.size() && t < 32; ++t)
    if (system.kinds[t].host_index > 0) l.recurrent_kinds &= ~(1u << t);
  return l;
}

Plan solve_shapes(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes,
                  const ObjectiveSpec& objective, SolverKind solver, const SpaceLimits& limits) {
  if (shapes.empty()) return solve(system, model, objective, solver, limits);
  const auto start = std::chrono::steady_clock::now();
  detail::check_objective(objective);
  const CostTables flat(system, model, limits);
  detail::require_schedulable(flat);
  std::vector<FoldedCostModel> folded;
  std::vector<CostTables> folded_tables;
  for (const Shape& s : shapes) {
    folded.emplace_back(model, s);
    folded_tables.emplace_back(system, folded.back(), fold_limits(limits, s));
  }

  std::optional<Candidate> best;
  const Objective goal = objective.objective;
  auto keep = [&](detail::Found f, Shape shape, const CostTables& t, const detail::Caps& caps) {
    // One-stage recurrent plans are the flat ones (priced here with a hand-off they do not make).
    if (shape.rounds > 1 && f.stages.size() < 2) return;
    Candidate c{std::move(f), shape, std::nullopt, caps};
    if (best && !better(c, *best, goal == Objective::balanced ? Objective::energy : goal)) return;
    if (shape.rounds > 1) c.tables.emplace(t);
    best = std::move(c);
  };
  ObjectiveSpec o = objective;
  if (goal == Objective::balanced) {
    // Every shape is held to the fastest period over all of them: a qos run per shape with that
    // throughput floor is the balanced objective.
    std::optional<Candidate> fastest;
    each_solve(flat, folded_tables, folded, shapes, {.objective = Objective::perf}, solver,
               [&](detail::Found f, Shape shape, const CostTables&, const detail::Caps&) {
                 if (shape.rounds > 1 && f.stages.size() < 2) return;
                 Candidate c{std::move(f), shape, std::nullopt, {}};
                 if (!fastest || better(c, *fastest, Objective::perf)) fastest = std::move(c);
               });
    if (!fastest) throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
    o = {.objective = Objective::qos,
         .balance_ratio = objective.balance_ratio,
         .min_throughput_per_s = objective.balance_ratio / fastest->found.fig.period};
  }
  const auto error = each_solve(flat, folded_tables, folded, shapes, o, solver, keep);
  if (!best) {
    if (error && !shapes.empty() && o.min_throughput_per_s > 0) {
      // Each shape's solve diagnosed its own tables; a throughput floor out of reach is said with
      // the fastest plan over every shape, not the first shape's.
      double fastest = kInf;
      each_solve(flat, folded_tables, folded, shapes, {.objective = Objective::perf}, solver,
                 [&](detail::Found f, Shape shape, const CostTables&, const detail::Caps&) {
                   if (shape.rounds > 1 && f.stages.size() < 2) return;
                   fastest = std::min(fastest, f.fig.period);
                 });
      if (!within(fastest, 1.0 / o.min_throughput_per_s))
        throw InfeasibleError(std::string(to_string(goal)) + ": min throughput " +
                              detail::fmt(o.min_throughput_per_s, "/s") + " infeasible: best achievable " +
                              detail::fmt(fastest < kInf ? 1.0 / fastest : 0.0, "/s") +
                              " over flat and layer-recurrent plans");
    }
    if (error) throw *error;
    throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
  }
  const CostTables& t = best->tables ? *best->tables : flat;
  Plan plan = evaluate(best->found.stages, t);
  plan.objective = to_string(goal);
  plan.solver = to_string(solver);
  plan.score = detail::score(plan.period_s, plan.energy_j, plan.latency_s, goal);
  if (best->shape.rounds > 1) {
    plan.rounds = best->shape.rounds;
    plan.round_kernels = best->shape.round_kernels;
    plan.mnemonic = "(" + plan.mnemonic + ")x" + std::to_string(plan.rounds);
  }
  // The winner's own passes, run again with a log (one solve on small tables).
  detail::PassLog log;
  detail::Caps caps;
  run(t, o, solver, caps, &log);
  std::string searched = "flat";
  for (const Shape& s : shapes) searched += ", x" + std::to_string(s.rounds);
  plan.passes.push_back({.number = 0,
                         .name = "shapes: flat, and recurrent per end-group pair",
                         .method = "each shape",
                         .found = true,
                         .period_s = plan.period_s,
                         .energy_j = plan.energy_j,
                         .work = searched});
  for (SolverPass& p : log.take()) plan.passes.push_back(std::move(p));
  detail::explain_with(plan, t, goal, best->caps);
  plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

std::vector<Plan> pareto_front_shapes(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes) {
  std::vector<Plan> all = pareto_front(CostTables(system, model));
  for (const Shape& shape : shapes) {
    const FoldedCostModel folded(model, shape);
    CostTables t(system, folded);
    for (int kf = 0; kf < t.num_kc(); ++kf) {
      for (int kl = 0; kl < t.num_kc(); ++kl) {
        pin_ends(t, folded, kf, kl);
        std::vector<Plan> front;
        try {
          front = pareto_front(t);
        } catch (const InfeasibleError&) {
          continue;  // a kernel no kind runs: no shape has a plan
        }
        for (Plan& p : front) {
          if (p.stages.size() < 2) continue;  // the flat one-stage plans, priced with a hand-off
          p.rounds = shape.rounds;
          p.round_kernels = shape.round_kernels;
          p.mnemonic = "(" + p.mnemonic + ")x" + std::to_string(shape.rounds);
          all.push_back(std::move(p));
        }
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const Plan& a, const Plan& b) {
    if (a.period_s != b.period_s) return a.period_s < b.period_s;
    if (a.energy_j != b.energy_j) return a.energy_j < b.energy_j;
    if (a.devices_used != b.devices_used) return a.devices_used < b.devices_used;
    return a.rounds < b.rounds;  // the flat plan first on a tie
  });
  std::vector<Plan> front;
  for (Plan& p : all) {
    // Sorted by period, so only plans already kept can dominate p.
    bool dominated = false;
    for (const Plan& k : front) dominated = dominated || (k.energy_j <= p.energy_j && k.devices_used <= p.devices_used);
    if (!dominated) front.push_back(std::move(p));
  }
  return front;
}

Plan evaluate_recurrent(const std::vector<StageSpec>& stages, const SystemSpec& system, const CostModel& model,
                        Shape shape) {
  if (shape.rounds <= 1) return evaluate(stages, CostTables(system, model));
  const FoldedCostModel folded(model, shape);
  CostTables t(system, folded);
  if (stages.size() >= 2) pin_ends(t, folded, stages.front().kc, stages.back().kc);
  Plan p = evaluate(stages, t);
  p.rounds = shape.rounds;
  p.round_kernels = shape.round_kernels;
  p.mnemonic = "(" + p.mnemonic + ")x" + std::to_string(shape.rounds);
  return p;
}

std::vector<EnumeratedShapePlan> enumerate_shape_plans(const SystemSpec& system, const CostModel& model,
                                                       const std::vector<Shape>& shapes) {
  std::vector<EnumeratedShapePlan> out;
  const CostTables flat(system, model);
  for (auto& p : enumerate_plans(flat)) out.push_back({std::move(p), {1, flat.num_kernels()}});
  for (const Shape& s : shapes) {
    const FoldedCostModel folded(model, s);
    CostTables t(system, folded);
    for (auto& p : enumerate_plans(t)) {
      if (p.stages.size() < 2) continue;  // the flat one-stage plans
      pin_ends(t, folded, p.stages.front().kc, p.stages.back().kc);
      const Figures f = figures(p.stages, t);
      out.push_back({{p.stages, f.period, f.latency, f.energy, f.devices}, s});
    }
  }
  return out;
}

}  // namespace dype::sched
