// Layer-recurrent plans (recurrent.h): the shapes, the folded cost model, the folded tables with
// their ends pinned, the Pareto front over every shape and the brute force. The search itself,
// solve_shapes(), is in shape_search.cpp.
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
#include "scheduler/solver/recurrent_tables.h"

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

namespace detail {

SpaceLimits fold_limits(const SpaceLimits& limits, Shape shape) {
  SpaceLimits out;
  out.max_count = limits.max_count;
  if (limits.allowed_kinds.empty() && limits.recurrent_kinds == ~0u) return out;
  out.allowed_kinds.assign(static_cast<std::size_t>(shape.round_kernels), limits.recurrent_kinds);
  for (std::size_t k = 0; k < limits.allowed_kinds.size(); ++k)
    out.allowed_kinds[k % static_cast<std::size_t>(shape.round_kernels)] &= limits.allowed_kinds[k];
  return out;
}

void pin_ends(CostTables& t, const FoldedCostModel& folded, int kf, int kl) {
  std::vector<double> entry(static_cast<std::size_t>(t.num_kc()), kInf), exit = entry;
  const CostModel::Sides h = folded.handoff_sides(t.group(kl), t.group(kf));
  entry[static_cast<std::size_t>(kf)] = h.in_s;
  exit[static_cast<std::size_t>(kl)] = h.out_s;
  t.set_ends(std::move(entry), std::move(exit));
}

}  // namespace detail

SpaceLimits coordinator_recurrence(const SystemSpec& system) {
  SpaceLimits l;
  for (std::size_t t = 0; t < system.kinds.size() && t < 32; ++t)
    if (system.kinds[t].host_index > 0) l.recurrent_kinds &= ~(1u << t);
  return l;
}

std::vector<Plan> pareto_front_shapes(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes) {
  std::vector<Plan> all = pareto_front(CostTables(system, model));
  for (const Shape& shape : shapes) {
    const FoldedCostModel folded(model, shape);
    CostTables t(system, folded);
    for (int kf = 0; kf < t.num_kc(); ++kf) {
      for (int kl = 0; kl < t.num_kc(); ++kl) {
        detail::pin_ends(t, folded, kf, kl);
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
  if (stages.size() >= 2) detail::pin_ends(t, folded, stages.front().kc, stages.back().kc);
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
      detail::pin_ends(t, folded, p.stages.front().kc, p.stages.back().kc);
      const Figures f = figures(p.stages, t);
      out.push_back({{p.stages, f.period, f.latency, f.energy, f.devices}, s});
    }
  }
  return out;
}

}  // namespace dype::sched
