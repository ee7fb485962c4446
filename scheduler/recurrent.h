#pragma once
// Layer-recurrent plans. A model whose layers repeat (the sliding-window transformer's 32 layers,
// a deep GNN) may be planned over the kernels of g layers, one round, that every request
// traverses R = L / g times: stage s runs its kernels of every round on the same devices. With 3
// FPGAs and 2 GPUs the FPGAs can then run the attention of all 32 layers and the GPUs their
// GEMMs, which no flat plan can (a flat plan's 160 kernels would need a device per stage).
// Mnemonic: `(1G3F1G)x32`.
//
//   const auto shapes = sched::recurrent_shapes(ops, 32);          // x32, x16, x8, x4, x2
//   sched::Plan p = sched::solve_shapes(sys, model, shapes, {.objective = Objective::energy});
//   p.rounds;  // 32 when the best plan recurs per layer; 1 when it is flat
//
// Cost model: plan.h's formulas over one round, with every term summed over the rounds (stage s's
// kernels of round r are kernels [first + r m, last + r m] of the chain, m = kernels per round):
//   C_s = sum_r f_perf(stage s's kernels of round r),  X_s = sum_r f_comm(boundary of round r),
//   H   = sum_{r < R-1} f_comm(last kernel of round r, last stage's group -> first stage's group),
//         the hand-off, received by stage 1 and sent by stage S when S >= 2 (one stage keeps its
//         data on its devices),
//   T_s = X_s + C_s + X_{s+1} with X_1 = X_{S+1} = H: a stage's busy time per request; P = max T_s;
//   latency = sum_s (X_s + C_s) + H; energy as in plan.h. A flat plan is R = 1.
// The model assumes enough requests in flight to keep every stage busy (the runtime admits twice
// the stage count).
//
// Exactness: H closes a cycle (stage 1's time depends on stage S's group), so each shape is solved
// once per (first group, last group) pair with CostTables::set_ends() pinning both ends and
// charging H to them; a one-stage recurrent plan is the flat one-stage plan, which the flat solve
// covers. The solvers run unchanged on the folded tables, so the exact one stays exact (tests:
// brute force over every shape and end pair).
#include <vector>

#include "common/op.h"
#include "scheduler/cost_model.h"
#include "scheduler/solver.h"
#include "scheduler/workload.h"

namespace dype::sched {

struct Shape {
  int rounds = 1;         // 1 = flat
  int round_kernels = 0;  // kernels per round (m)
};

// The recurrent shapes of a chain of `ops` made of `layers` layers with the same kernels each:
// one per divisor g < layers (g layers a round, layers / g rounds), largest round count first.
// Empty when the chain does not repeat layer by layer or has one layer.
std::vector<Shape> recurrent_shapes(const std::vector<kernels::OpKind>& ops, int layers);
// Same, for a workload built from a model config (its kernels' `layer` numbers give the count).
std::vector<Shape> recurrent_shapes(const Workload& workload);

// `base` seen through one round of `shape`: kernel k of the round stands for kernels k + r m.
class FoldedCostModel : public CostModel {
 public:
  FoldedCostModel(const CostModel& base, Shape shape);
  int num_kernels() const override { return shape_.round_kernels; }
  double compute_time_s(int first, int last, DeviceGroup group) const override;
  double copy_time_s(int first, int last, DeviceGroup group) const override;         // every round's
  double waited_copy_time_s(int first, int last, DeviceGroup group) const override;  // every round's
  double copy_in_time_s(int first, int last, DeviceGroup group) const override;      // every round's
  double copy_out_time_s(int first, int last, DeviceGroup group) const override;     // every round's
  double output_bytes(int k) const override { return base_.output_bytes(k); }  // round 0's
  double transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const override;
  double transfer_out_s(int k, DeviceGroup from, DeviceGroup to) const override;
  double transfer_in_s(int k, DeviceGroup from, DeviceGroup to) const override;
  Sides transfer_sides(int k, DeviceGroup from, DeviceGroup to) const override;
  // Once per request: the input reaches round 0's first stage, the result leaves the last round.
  double host_input_s(DeviceGroup g) const override { return base_.host_input_s(g); }
  double host_output_s(DeviceGroup g) const override { return base_.host_output_s(g); }
  // Every round's kernels on the same devices: their weights add up, the graph rows are shared.
  Footprint footprint(int first, int last, DeviceGroup group) const override;
  // Every round's power weighted by its time.
  double execute_w(int first, int last, DeviceGroup group) const override;
  // H above: every round's hand-off from the last stage's group back to the first's, as it
  // occupies the last stage (out) and the first (in).
  double handoff_out_s(DeviceGroup from, DeviceGroup to) const;
  double handoff_in_s(DeviceGroup from, DeviceGroup to) const;
  Sides handoff_sides(DeviceGroup from, DeviceGroup to) const;  // both at once

 private:
  const CostModel& base_;
  Shape shape_;
};

// The limits that keep recurrent shapes on the coordinator's kinds (host_index 0): the runtime
// relays a remote stage's every hand-off, and runs no recurrent pipeline through one.
SpaceLimits coordinator_recurrence(const SystemSpec& system);

// The best plan over the flat chain and every shape in `shapes` (figures as above; Plan::rounds
// and Plan::round_kernels say which). limits.allowed_kinds, when given, is per kernel of the whole
// chain. Without shapes this is solve(system, model, objective, solver, limits). Balanced holds
// every shape to the fastest period over all of them; the Pareto front stays flat.
// The search (shape_search.cpp) skips every solve (the flat one, a shape's end pair) that a sound
// bound shows cannot beat the plan it already has, so the plan is the one a solve of every end
// pair gives (ShapeSearch::skip = false runs them all, the exhaustive search tests compare with).
struct ShapeSearch {
  // Plans whose score (period for perf, latency for latency, energy otherwise) is above it are of
  // no use to the caller (image choice: another image assignment's plan already wins), so solves
  // whose plans all score above it are skipped too; when that leaves no plan the result is an
  // empty Plan (no stages) instead of an InfeasibleError. Whenever the exhaustive search's plan
  // scores at most score_limit, it is the plan returned.
  double score_limit = kInf;
  bool skip = true;  // false: every solve runs and score_limit is ignored
};
Plan solve_shapes(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes,
                  const ObjectiveSpec& objective, SolverKind solver = SolverKind::exact,
                  const SpaceLimits& limits = {}, const ShapeSearch& search = {});

// The Pareto front (throughput up, energy down, devices down; solver.h's pareto_front) over the
// flat chain and every shape in `shapes`, sorted by period.
std::vector<Plan> pareto_front_shapes(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes);

// A recurrent plan's figures: `stages` over one round of `shape`, priced with the hand-off.
Plan evaluate_recurrent(const std::vector<StageSpec>& stages, const SystemSpec& system, const CostModel& model,
                        Shape shape);

// Every feasible plan of every shape (flat included) with its figures, for tests: the brute force
// that solve_shapes() must match. Stages index kernels of one round; `rounds` says the shape.
struct EnumeratedShapePlan {
  EnumeratedPlan plan;
  Shape shape;
};
std::vector<EnumeratedShapePlan> enumerate_shape_plans(const SystemSpec& system, const CostModel& model,
                                                       const std::vector<Shape>& shapes);

}  // namespace dype::sched
