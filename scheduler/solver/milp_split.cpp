// MILP-SPLIT (milp_split.h): module MILPs under device budgets, combined by a DP over the modules.
#include "scheduler/solver/milp_split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "scheduler/solver.h"
#include "scheduler/solver/lower_bound.h"
#include "scheduler/solver/milp.h"

namespace dype::sched::detail {

bool additive_across(const CostTables& t, int m, int kc) {
  for (int a = 0; a <= m; ++a)
    for (int b = m + 1; b < t.num_kernels(); ++b) {
      const double whole = t.compute(a, b, kc), pieces = t.compute(a, m, kc) + t.compute(m + 1, b, kc);
      if (!(whole < kInf) && !(pieces < kInf)) continue;
      if (!(std::abs(pieces - whole) <= 1e-9 * std::max(whole, pieces))) return false;
    }
  return true;
}

namespace {

using Usage = std::vector<int>;

bool fits(const Usage& u, const Usage& cap) {
  for (std::size_t k = 0; k < u.size(); ++k)
    if (u[k] > cap[k]) return false;
  return true;
}

// One module's MILP solution under a device budget.
struct Piece {
  bool ok = false;
  Usage budget;  // the budget it was solved under
  Usage used;    // the devices it adds to the plan (a continued first stage's are the previous module's)
  double latency = kInf;
  std::vector<StageSpec> stages;  // in the chain's kernel numbering
};

class Splitter {
 public:
  // Entries: kStart (module 0), p in [0, kcs) after a stage on p, kcs + q continuing q's stage.
  // Exits: kEnd (the last module), x in [0, kcs) a last stage on x.
  static constexpr int kStart = -1, kEnd = -1;

  Splitter(const CostTables& t, std::vector<Module> modules) : t_(t), modules_(std::move(modules)) {
    for (const Module& m : modules_) subs_.push_back(t.sub_chain(m.first, m.last));
  }
  int solves() const { return solves_; }

  const Piece& piece(int j, int entry, int exit, const Usage& budget) {
    std::vector<Piece>& known = memo_[{j, entry, exit}];
    for (const Piece& p : known) {
      // Solved under a larger budget with a plan inside this one (or infeasible under it).
      if (fits(budget, p.budget) && (!p.ok || fits(p.used, budget))) return p;
    }
    known.push_back(solve(j, entry, exit, budget));
    return known.back();
  }

  // Every module solution under `budget` that no other one beats in both devices and latency (a
  // plan that uses fewer of some kind than the best one fits the budget with that kind lowered).
  std::vector<Piece> pareto(int j, int entry, int exit, const Usage& budget) {
    std::vector<Piece> front;
    std::map<Usage, bool> seen;
    std::vector<Usage> todo{budget};
    while (!todo.empty()) {
      const Usage b = todo.back();
      todo.pop_back();
      if (seen[b]) continue;
      seen[b] = true;
      const Piece p = piece(j, entry, exit, b);
      if (!p.ok) continue;
      front.push_back(p);
      for (std::size_t k = 0; k < b.size(); ++k) {
        if (p.used[k] == 0) continue;
        Usage less = b;
        less[k] = p.used[k] - 1;
        todo.push_back(less);
      }
    }
    std::vector<Piece> kept;
    for (const Piece& p : front) {
      bool beaten = false;
      for (const Piece& q : front) {
        const bool better = fits(q.used, p.used) && q.latency <= p.latency && (q.used != p.used || q.latency < p.latency);
        beaten = beaten || better;
      }
      bool twin = false;  // the same solution reached from two budgets
      for (const Piece& q : kept) twin = twin || (q.used == p.used && q.latency == p.latency);
      if (!beaten && !twin) kept.push_back(p);
    }
    return kept;
  }

 private:
  Piece solve(int j, int entry, int exit, const Usage& budget) {
    const int kcs = t_.num_kc();
    CostTables sub = subs_[static_cast<std::size_t>(j)];
    std::vector<double> in(kcs), out(kcs);
    const int cut = modules_[static_cast<std::size_t>(j)].first - 1;
    const int cont = entry >= kcs ? entry - kcs : -1;
    for (int kc = 0; kc < kcs; ++kc) {
      in[kc] = entry == kStart ? sub.entry(kc) : cont >= 0 ? (kc == cont ? 0.0 : kInf) : t_.transfer_in(cut, entry, kc);
      out[kc] = exit == kEnd ? sub.exit(kc) : (kc == exit ? 0.0 : kInf);
    }
    sub.set_ends(std::move(in), std::move(out));
    Usage limit = budget;
    if (cont >= 0) limit[t_.group(cont).kind] += t_.group(cont).count;  // the continued stage's own devices
    sub.limit_counts(limit);
    Caps caps;
    const Found f = solve_milp(sub, {.objective = Objective::latency}, caps, nullptr);
    ++solves_;
    Piece p;
    p.ok = f.ok;
    p.budget = budget;
    if (!f.ok) return p;
    p.used.assign(budget.size(), 0);
    const int offset = modules_[static_cast<std::size_t>(j)].first;
    for (StageSpec s : f.stages) {
      p.used[t_.group(s.kc).kind] += t_.group(s.kc).count;
      s.first += offset, s.last += offset;
      p.stages.push_back(s);
    }
    if (cont >= 0) p.used[t_.group(cont).kind] -= t_.group(cont).count;
    p.latency = f.fig.latency;
    return p;
  }

  const CostTables& t_;
  std::vector<Module> modules_;
  std::vector<CostTables> subs_;
  std::map<std::tuple<int, int, int>, std::vector<Piece>> memo_;
  int solves_ = 0;
};

// A partial plan after some modules: the devices it uses, the group its last stage runs on, and
// how it got there (the state before it, and this module's stages).
struct State {
  Usage used;
  int exit = 0;
  double latency = kInf;
  int prev = -1;
  bool continued = false;
  std::vector<StageSpec> stages;
};

// Keeps the states no other state with the same exit beats in devices and latency.
std::vector<State> undominated(std::vector<State> states) {
  std::sort(states.begin(), states.end(), [](const State& a, const State& b) { return a.latency < b.latency; });
  std::vector<State> kept;
  for (State& s : states) {
    bool beaten = false;
    for (const State& k : kept) beaten = beaten || (k.exit == s.exit && fits(k.used, s.used));
    if (!beaten) kept.push_back(std::move(s));
  }
  return kept;
}

}  // namespace

Found solve_milp_split(const CostTables& t, const ObjectiveSpec& o, Caps& caps, PassLog* log, int max_module_kernels) {
  if (o.objective != Objective::latency || o.min_throughput_per_s > 0) {
    throw InputError("solver", "milp-split plans the latency objective without a throughput floor only: a stage's "
                               "period takes its hand-out into the next module and a spanning stage's whole range, "
                               "and the period and the idle energy do not add up over modules, so module optima do "
                               "not combine into an optimum (use milp or exact)");
  }
  caps = caps_for(o, kInf);
  const std::vector<Module> modules = split_modules(t, max_module_kernels, Objective::latency);
  const Pass pass{.number = 9, .name = "quickest: least latency, module by module", .goal = Goal::latency};
  if (modules.size() == 1) {
    Found f = solve_milp(t, o, caps, nullptr);
    if (log) log->add(pass, "MILP-SPLIT (1 module: the whole MILP)", f, "1 MILP");
    return f;
  }
  const int kcs = t.num_kc(), last = static_cast<int>(modules.size()) - 1;
  const Usage pool = t.max_counts();
  Splitter split(t, modules);
  // states[j]: the undominated partial plans through module j (the last: only the best).
  std::vector<std::vector<State>> states(modules.size());
  for (int x = 0; x < kcs; ++x)
    for (const Piece& p : split.pareto(0, Splitter::kStart, x, pool))
      states[0].push_back({.used = p.used, .exit = x, .latency = p.latency, .stages = p.stages});
  states[0] = undominated(std::move(states[0]));
  for (int j = 1; j <= last; ++j) {
    const int cut = modules[static_cast<std::size_t>(j)].first - 1;
    std::vector<bool> additive(kcs);
    for (int q = 0; q < kcs; ++q) additive[q] = additive_across(t, cut, q);
    std::vector<State> next;
    for (std::size_t i = 0; i < states[j - 1].size(); ++i) {
      const State& before = states[j - 1][i];
      Usage rest = pool;
      for (std::size_t k = 0; k < rest.size(); ++k) rest[k] -= before.used[k];
      for (const bool continued : {false, true}) {
        if (continued && !additive[before.exit]) continue;
        const int entry = continued ? kcs + before.exit : before.exit;
        for (int x = 0; x < (j == last ? 1 : kcs); ++x) {
          std::vector<Piece> pieces;
          if (j == last) {
            const Piece& p = split.piece(j, entry, Splitter::kEnd, rest);  // nothing after: the best will do
            if (p.ok) pieces.push_back(p);
          } else {
            pieces = split.pareto(j, entry, x, rest);
          }
          for (const Piece& p : pieces) {
            State s{.used = before.used, .exit = x, .latency = before.latency + p.latency,
                    .prev = static_cast<int>(i), .continued = continued, .stages = p.stages};
            for (std::size_t k = 0; k < s.used.size(); ++k) s.used[k] += p.used[k];
            next.push_back(std::move(s));
          }
        }
      }
    }
    states[j] = undominated(std::move(next));
  }
  // The best complete plan, walked back; a continued stage is one stage of the plan.
  Found f;
  if (!states[last].empty()) {
    std::vector<const State*> chosen;
    for (int j = last, i = 0; j >= 0; i = chosen.back()->prev, --j) chosen.push_back(&states[j][static_cast<std::size_t>(i)]);
    std::reverse(chosen.begin(), chosen.end());
    for (const State* c : chosen) {
      auto first = c->stages.begin();
      if (c->continued) f.stages.back().last = (first++)->last;
      f.stages.insert(f.stages.end(), first, c->stages.end());
    }
    f.fig = figures(f.stages, t);
    f.ok = true;
  }
  if (log) {
    std::string how = "MILP-SPLIT (" + std::to_string(modules.size()) + " modules:";
    for (const Module& m : modules) how += " " + std::to_string(m.first) + "-" + std::to_string(m.last);
    log->add(pass, (how + ", DP over devices used and the last group)").c_str(), f,
             PassLog::count(static_cast<std::size_t>(split.solves()), "module MILP"));
  }
  return f;
}

}  // namespace dype::sched::detail
