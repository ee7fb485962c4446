// Lower bounds (lower_bound.h): DiviML's module-split bound on a chain and the MILP's LP relaxation.
#include "scheduler/solver/lower_bound.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "scheduler/solver/dispatch.h"
#include "scheduler/solver/exact.h"
#include "scheduler/solver/milp.h"

namespace dype::sched {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The hand-off after kernel m: its mean inbound time over the group pairs that can take it.
double mean_handoff(const CostTables& t, int m) {
  double sum = 0;
  int count = 0;
  for (int p = 0; p < t.num_kc(); ++p)
    for (int q = 0; q < t.num_kc(); ++q)
      if (const double x = t.transfer_in(m, p, q); x < kInf) sum += x, ++count;
  return count ? sum / count : 0.0;
}

std::string describe(const std::vector<Module>& modules) {
  std::string s = std::to_string(modules.size()) + (modules.size() == 1 ? " module:" : " modules:");
  for (const Module& m : modules) s += " " + std::to_string(m.first) + "-" + std::to_string(m.last);
  return s;
}

}  // namespace

double latency_slack(const CostTables& t, int m) {
  double slack = 0;
  for (int a = 0; a <= m; ++a)
    for (int b = m + 1; b < t.num_kernels(); ++b)
      for (int kc = 0; kc < t.num_kc(); ++kc) {
        const double whole = t.compute(a, b, kc);
        if (!(whole < kInf)) continue;
        slack = std::max(slack, t.compute(a, m, kc) + t.compute(m + 1, b, kc) - whole);
      }
  return slack;
}

double period_slack(const CostTables& t, int m) {
  const int n = t.num_kernels();
  double slack = 0;
  std::vector<double> sides;
  for (int a = 0; a <= m; ++a)
    for (int b = m + 1; b < n; ++b)
      for (int kc = 0; kc < t.num_kc(); ++kc) {
        if (!(t.compute(a, b, kc) < kInf)) continue;
        // The prefix [a, m] keeps the stage's hand-in x and leaves its module with nothing; a
        // stage starting inside a module may also have been entered free (x = 0, a middle piece).
        sides.assign(1, a == 0 ? t.entry(kc) : 0.0);
        if (a > 0)
          for (int p = 0; p < t.num_kc(); ++p) sides.push_back(t.transfer_in(a - 1, p, kc));
        for (const double x : sides)
          if (x < kInf) slack = std::max(slack, t.stage_time(x, a, m, kc, 0.0) - t.stage_time(x, a, b, kc, 0.0));
        // The suffix [m + 1, b] is entered free and keeps the stage's hand-out y.
        sides.assign(1, b == n - 1 ? t.exit(kc) : 0.0);
        if (b < n - 1)
          for (int q = 0; q < t.num_kc(); ++q) sides.push_back(t.transfer_out(b, kc, q));
        for (const double y : sides)
          if (y < kInf) slack = std::max(slack, t.stage_time(0.0, m + 1, b, kc, y) - t.stage_time(0.0, a, b, kc, y));
      }
  return std::isnan(slack) ? kInf : slack;
}

std::vector<double> cut_costs(const CostTables& t, Objective objective) {
  std::vector<double> cost;
  for (int m = 0; m + 1 < t.num_kernels(); ++m) {
    const double slack = objective == Objective::latency ? latency_slack(t, m)
                         : objective == Objective::perf  ? period_slack(t, m)
                                                         : 0.0;
    cost.push_back(mean_handoff(t, m) + slack);
  }
  return cost;
}

std::vector<Module> split_modules(const CostTables& t, int max_kernels, Objective objective) {
  const int n = t.num_kernels(), k = std::max(1, max_kernels);
  if (n <= k) return {{0, n - 1}};
  const int parts = (n + k - 1) / k;
  const std::vector<double> cost = cut_costs(t, objective);
  // best[i][j]: least cut cost splitting kernels [0, i) into j modules of at most k kernels.
  std::vector<std::vector<double>> best(n + 1, std::vector<double>(parts + 1, kInf));
  std::vector<std::vector<int>> from(n + 1, std::vector<int>(parts + 1, -1));
  best[0][0] = 0;
  for (int i = 1; i <= n; ++i)
    for (int j = 1; j <= parts; ++j)
      for (int s = std::max(0, i - k); s < i; ++s) {
        if (!(best[s][j - 1] < kInf)) continue;
        const double c = best[s][j - 1] + (s > 0 ? cost[s - 1] : 0.0);
        if (c < best[i][j]) best[i][j] = c, from[i][j] = s;
      }
  if (!(best[n][parts] < kInf)) return {{0, n - 1}};  // every cut unusable: the chain is one module
  std::vector<Module> modules;
  for (int i = n, j = parts; j > 0; i = from[i][j], --j) modules.push_back({from[i][j], i - 1});
  std::reverse(modules.begin(), modules.end());
  return modules;
}

double Bounds::best() const {
  double b = -kInf;
  if (split.ok) b = std::max(b, split.value);
  if (lp.ok) b = std::max(b, lp.value);
  return b;
}

Bound module_split_bound(const CostTables& t, const ObjectiveSpec& o, const SplitOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Bound bound;
  if (o.objective != Objective::perf && o.objective != Objective::latency) {
    bound.why_not = "module split bounds only the period (perf) and the latency: a stage spanning a cut would have "
                    "its idle energy charged by every module it touches";
    return bound;
  }
  const bool latency = o.objective == Objective::latency;
  const std::vector<Module> modules = split_modules(t, options.max_module_kernels, o.objective);
  // Each module alone: the least latency without the throughput floor (a piece of a plan need not
  // meet it), or the least period with every device.
  const ObjectiveSpec alone{.objective = o.objective};
  double value = latency ? 0.0 : -kInf;
  for (std::size_t j = 0; j < modules.size(); ++j) {
    const CostTables sub = t.sub_chain(modules[j].first, modules[j].last);
    detail::Caps caps;
    const detail::Found f = detail::run_solver(sub, alone, options.module_solver, caps, nullptr);
    if (!f.ok) {
      value = kInf;  // a module no devices can run: neither can the chain
      break;
    }
    // The cuts on either side (after kernel left / right; -1: the chain's end).
    const int left = j > 0 ? modules[j - 1].last : -1, right = j + 1 < modules.size() ? modules[j].last : -1;
    if (latency) {
      value += f.fig.latency - (left >= 0 ? latency_slack(t, left) : 0.0);
    } else {
      const double mu = (left >= 0 ? period_slack(t, left) : 0.0) + (right >= 0 ? period_slack(t, right) : 0.0);
      value = std::max(value, f.fig.period - mu);
    }
  }
  bound.ok = true;
  bound.value = std::max(0.0, value);
  bound.method = "module split (" + describe(modules) + "; each by " + to_string(options.module_solver) + ")";
  bound.solve_time_s = seconds_since(t0);
  return bound;
}

Bound lp_relaxation_bound(const CostTables& t, const ObjectiveSpec& o) {
  const auto t0 = std::chrono::steady_clock::now();
  Bound bound;
  double fastest = kInf;
  if (detail::caps_need_fastest(o)) {
    detail::Caps none;
    const detail::Found f = detail::solve_exact(t, {.objective = Objective::perf}, none, nullptr);
    if (f.ok) fastest = f.fig.period;
  }
  const detail::Caps caps = detail::caps_for(o, fastest);
  const detail::Goal goal = o.objective == Objective::perf      ? detail::Goal::period
                            : o.objective == Objective::latency ? detail::Goal::latency
                                                                : detail::Goal::energy;
  const double v = detail::milp_relaxation(t, goal, caps);
  bound.solve_time_s = seconds_since(t0);
  if (std::isnan(v)) {
    bound.why_not = "CLP did not prove the relaxation's optimum";
    return bound;
  }
  bound.ok = true;
  bound.value = std::max(0.0, v);
  bound.method = "LP relaxation of the MILP (CLP)";
  return bound;
}

Bounds lower_bounds(const CostTables& t, const ObjectiveSpec& o, const SplitOptions& options) {
  Bounds b;
  b.split = module_split_bound(t, o, options);
  b.lp = lp_relaxation_bound(t, o);
  const Bound period = o.objective == Objective::perf ? b.split : module_split_bound(t, {.objective = Objective::perf}, options);
  if (period.ok && period.value > 0) b.max_throughput_per_s = 1.0 / period.value;
  return b;
}

}  // namespace dype::sched
