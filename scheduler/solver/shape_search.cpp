// solve_shapes() (recurrent.h): the flat chain and every layer-recurrent shape, each shape once per
// (first group, last group) pair with the hand-off pinned to the ends, the best kept.
//
// Most of those solves cannot win, and none runs when a sound bound shows it (score_bound.h): its
// plans' least score (a lower bound from its first and last stages; for the period also one
// exact PeriodSearch check) is above what could still matter: the score of the plan kept so far
// (plus a margin far above rounding and the 1e-12 of better()'s ties, so a solve whose plan
// could tie is never skipped) and the caller's score_limit. A skipped solve would not have
// replaced the plan kept, so the result is the search's without skipping. All tables are built
// over one TransferMemo (a folded shape's hand-offs are sums of the flat chain's, asked once) and
// ask for a hand-off only when a solve reads it (CostTables::LazyTransfers): a skipped solve
// reads none, a period check a few.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <string>

#include "scheduler/recurrent.h"
#include "scheduler/solver/dispatch.h"
#include "scheduler/solver/explain.h"
#include "scheduler/solver/format.h"
#include "scheduler/solver/objective.h"
#include "scheduler/solver/recurrent_tables.h"
#include "scheduler/solver/score_bound.h"
#include "scheduler/solver/transfer_memo.h"

namespace dype::sched {

namespace {

// Margins of the skip tests, relative to the score they are measured from. Against the plan kept:
// better() calls scores within 1e-12 a tie (broken by the other figure), so only solves whose
// every plan is 4e-12 worse are skipped. Against the caller's limit: 1e-13 above rounding.
constexpr double kKeptMargin = 4e-12;
constexpr double kLimitMargin = 1e-13;

// One plan kept: its stages and figures, the solve that found it (shape -1: flat; kf, kl: the
// pinned end groups of a recurrent one), its caps and the passes it ran.
struct Candidate {
  detail::Found found;
  Shape shape;
  int shape_index = -1;
  int kf = -1, kl = -1;
  detail::Caps caps;
  std::vector<SolverPass> passes;
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

double above(double score, double margin) { return score + margin * std::abs(score); }

// The flat tables and every shape's folded ones, all over one memo of the model's hand-offs.
class ShapeTables {
 public:
  ShapeTables(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes,
              const SpaceLimits& limits)
      : shapes_(shapes), memo_(model, system), flat_(system, memo_, limits, CostTables::LazyTransfers{}) {
    for (const Shape& s : shapes) {
      folded_.emplace_back(memo_, s);  // a deque: the models stay where the tables saw them
      tables_.emplace_back(system, folded_.back(), detail::fold_limits(limits, s), CostTables::LazyTransfers{});
    }
  }
  ShapeTables(const ShapeTables&) = delete;
  ShapeTables& operator=(const ShapeTables&) = delete;

  const CostTables& flat() const { return flat_; }
  std::size_t shapes() const { return shapes_.size(); }
  const Shape& shape(std::size_t i) const { return shapes_[i]; }
  // Shape i's tables with the ends pinned to (kf, kl).
  CostTables pinned(std::size_t i, int kf, int kl) const {
    CostTables t = tables_[i];
    detail::pin_ends(t, folded_[i], kf, kl);
    return t;
  }
  // Every end pair of shape i in turn: f(kf, kl, above, pinned), above(objective, limit) whether
  // the pair's score_lower_bound() is above the limit and pinned() its tables, pinned on one copy
  // of shape i's tables when asked. The bound is tried without the hand-off first (a lower bound
  // too, stage times growing with it), which often settles it without asking the model for it.
  template <class F>
  void each_pair(std::size_t i, F f) const {
    const CostTables& base = tables_[i];
    std::optional<CostTables> t;
    for (int kf = 0; kf < base.num_kc(); ++kf) {
      for (int kl = 0; kl < base.num_kc(); ++kl) {
        const auto above = [&](Objective o, double limit) {
          if (detail::score_lower_bound(base, o, kf, 0.0, kl, 0.0) > limit) return true;
          const CostModel::Sides h = folded_[i].handoff_sides(base.group(kl), base.group(kf));
          return detail::score_lower_bound(base, o, kf, h.in_s, kl, h.out_s) > limit;
        };
        const auto pinned = [&]() -> const CostTables& {
          if (!t) t.emplace(base);
          detail::pin_ends(*t, folded_[i], kf, kl);
          return *t;
        };
        f(kf, kl, above, pinned);
      }
    }
  }

 private:
  const std::vector<Shape>& shapes_;
  detail::TransferMemo memo_;
  CostTables flat_;
  std::deque<FoldedCostModel> folded_;
  std::vector<CostTables> tables_;
};

struct Sweep {
  std::optional<InfeasibleError> error;  // the first solve's InfeasibleError (qos targets)
  int solves = 0;                        // the flat one and every end pair's
  int skipped = 0;                       // of them, skipped by a bound
};

// Runs `o` on the flat tables and every shape's end pairs, in that order, skipping a solve whose
// plans all score above limit() (kInf: none skipped); calls keep() with each plan found.
template <class Limit, class Keep>
Sweep each_solve(const ShapeTables& st, const ObjectiveSpec& o, SolverKind solver, Limit limit, Keep keep) {
  Sweep sw;
  // above(objective, limit): whether a lower bound on the solve's plans is above the limit;
  // tables(): the tables it runs on.
  auto attempt = [&](int shape, int kf, int kl, auto above, auto tables) {
    ++sw.solves;
    const double lim = limit();
    if (lim < kInf && above(o.objective, lim)) {
      ++sw.skipped;
      return;
    }
    const CostTables& t = tables();
    if (lim < kInf && o.objective == Objective::perf && !detail::period_within(t, lim)) {
      ++sw.skipped;
      return;
    }
    detail::Caps caps;
    detail::PassLog log;
    try {
      detail::Found f = detail::run_solver(t, o, solver, caps, &log);
      if (f.ok) keep(std::move(f), shape, kf, kl, caps, log);
    } catch (const InfeasibleError& e) {
      if (!sw.error) sw.error = e;
    }
  };
  const CostTables& flat = st.flat();
  attempt(
      -1, -1, -1, [&](Objective by, double lim) { return detail::score_lower_bound(flat, by) > lim; },
      [&]() -> const CostTables& { return flat; });
  for (std::size_t i = 0; i < st.shapes(); ++i)
    st.each_pair(i, [&](int kf, int kl, auto above, auto pinned) { attempt(static_cast<int>(i), kf, kl, above, pinned); });
  return sw;
}

}  // namespace

Plan solve_shapes(const SystemSpec& system, const CostModel& model, const std::vector<Shape>& shapes,
                  const ObjectiveSpec& objective, SolverKind solver, const SpaceLimits& limits,
                  const ShapeSearch& search) {
  const double limit = search.skip && search.score_limit < kInf ? above(search.score_limit, kLimitMargin) : kInf;
  const auto kept_limit = [&](double score) { return search.skip ? above(score, kKeptMargin) : kInf; };
  if (shapes.empty()) {
    if (!(limit < kInf)) return solve(system, model, objective, solver, limits);
    const auto start = std::chrono::steady_clock::now();
    detail::check_objective(objective);
    const CostTables tables(system, model, limits, CostTables::LazyTransfers{});
    detail::require_schedulable(tables);
    const Objective by = objective.objective == Objective::balanced ? Objective::energy : objective.objective;
    if (detail::score_lower_bound(tables, by) > limit ||
        (by == Objective::perf && !detail::period_within(tables, limit)))
      return {};
    Plan plan = solve(tables, objective, solver);
    plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return plan;
  }
  const auto start = std::chrono::steady_clock::now();
  detail::check_objective(objective);
  const ShapeTables st(system, model, shapes, limits);
  detail::require_schedulable(st.flat());

  const Objective goal = objective.objective;
  // A kept plan's solve and how it ranks; recurrent one-stage plans are the flat ones (priced
  // there with a hand-off they do not make), never kept.
  const auto candidate = [&](detail::Found f, int shape, int kf, int kl, const detail::Caps& caps) {
    return Candidate{std::move(f), shape < 0 ? Shape{1, st.flat().num_kernels()} : st.shape(static_cast<std::size_t>(shape)),
                     shape, kf, kl, caps, {}};
  };
  const auto recurrent_one_stage = [](const detail::Found& f, int shape) { return shape >= 0 && f.stages.size() < 2; };
  ObjectiveSpec o = objective;
  if (goal == Objective::balanced) {
    // Every shape is held to the fastest period over all of them: a qos run per shape with that
    // throughput floor is the balanced objective.
    std::optional<Candidate> fastest;
    each_solve(
        st, {.objective = Objective::perf}, solver,
        [&] { return fastest ? kept_limit(fastest->found.fig.period) : kInf; },
        [&](detail::Found f, int shape, int kf, int kl, const detail::Caps&, detail::PassLog&) {
          if (recurrent_one_stage(f, shape)) return;
          Candidate c = candidate(std::move(f), shape, kf, kl, {});
          if (!fastest || better(c, *fastest, Objective::perf)) fastest = std::move(c);
        });
    if (!fastest) throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
    o = {.objective = Objective::qos,
         .balance_ratio = objective.balance_ratio,
         .min_throughput_per_s = objective.balance_ratio / fastest->found.fig.period};
  }
  const Objective rank = goal == Objective::balanced ? Objective::energy : goal;
  std::optional<Candidate> best;
  const Sweep sweep = each_solve(
      st, o, solver,
      [&] { return std::min(limit, best ? kept_limit(detail::score(best->found.fig, rank)) : kInf); },
      [&](detail::Found f, int shape, int kf, int kl, const detail::Caps& caps, detail::PassLog& log) {
        if (recurrent_one_stage(f, shape)) return;
        Candidate c = candidate(std::move(f), shape, kf, kl, caps);
        if (best && !better(c, *best, rank)) return;
        c.passes = log.take();
        best = std::move(c);
      });
  if (!best) {
    if (limit < kInf && sweep.skipped > 0) return {};  // every plan scores above the caller's limit
    if (sweep.error && o.min_throughput_per_s > 0) {
      // Each shape's solve diagnosed its own tables; a throughput floor out of reach is said with
      // the fastest plan over every shape, not the first shape's.
      double fastest = kInf;
      each_solve(
          st, {.objective = Objective::perf}, solver, [&] { return fastest < kInf ? kept_limit(fastest) : kInf; },
          [&](detail::Found f, int shape, int, int, const detail::Caps&, detail::PassLog&) {
            if (recurrent_one_stage(f, shape)) return;
            fastest = std::min(fastest, f.fig.period);
          });
      if (!within(fastest, 1.0 / o.min_throughput_per_s))
        throw InfeasibleError(std::string(to_string(goal)) + ": min throughput " +
                              detail::fmt(o.min_throughput_per_s, "/s") + " infeasible: best achievable " +
                              detail::fmt(fastest < kInf ? 1.0 / fastest : 0.0, "/s") +
                              " over flat and layer-recurrent plans");
    }
    if (sweep.error) throw *sweep.error;
    throw InfeasibleError("no feasible schedule: the available devices cannot form a pipeline");
  }
  std::optional<CostTables> pinned;
  if (best->shape_index >= 0) pinned.emplace(st.pinned(static_cast<std::size_t>(best->shape_index), best->kf, best->kl));
  const CostTables& t = pinned ? *pinned : st.flat();
  Plan plan = evaluate(best->found.stages, t);
  plan.objective = to_string(goal);
  plan.solver = to_string(solver);
  plan.score = detail::score(plan.period_s, plan.energy_j, plan.latency_s, goal);
  if (best->shape.rounds > 1) {
    plan.rounds = best->shape.rounds;
    plan.round_kernels = best->shape.round_kernels;
    plan.mnemonic = "(" + plan.mnemonic + ")x" + std::to_string(plan.rounds);
  }
  std::string searched = "flat";
  for (const Shape& s : shapes) searched += ", x" + std::to_string(s.rounds);
  searched += "; " + std::to_string(sweep.solves) + " solves, " + std::to_string(sweep.skipped) + " skipped by their bounds";
  plan.passes.push_back({.number = 0,
                         .name = "shapes: flat, and recurrent per end-group pair",
                         .method = "each shape",
                         .found = true,
                         .period_s = plan.period_s,
                         .energy_j = plan.energy_j,
                         .work = searched});
  // The winner's own passes, as its solve logged them.
  for (SolverPass& p : best->passes) plan.passes.push_back(std::move(p));
  detail::explain_with(plan, t, goal, best->caps);
  plan.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace dype::sched
