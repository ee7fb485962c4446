#include "scheduler/baselines.h"

#include <chrono>

namespace dype::sched {

std::vector<std::string> baseline_names(const SystemSpec& system) {
  std::vector<std::string> names;
  for (const auto& k : system.kinds) names.push_back(k.name + "-only");
  names.insert(names.end(), {"theoretical-additive", "static", "fleetrec"});
  return names;
}

namespace {

Plan only(int kind, const SystemSpec& system, const CostModel& model, const ObjectiveSpec& objective) {
  SpaceLimits lim;
  lim.max_count.assign(system.kinds.size(), 0);
  lim.max_count[kind] = system.kinds[kind].count;
  if (system.kinds[kind].count == 0) throw InfeasibleError(system.kinds[kind].name + "-only: the system has no " + system.kinds[kind].name);
  Plan p = solve(system, model, objective, SolverKind::exact, lim);
  p.solver = system.kinds[kind].name + "-only";
  return p;
}

int pinned_kind(const SystemSpec& system, const Kernel& k, const std::string& baseline) {
  const int kind = system.op_kind[static_cast<std::size_t>(k.shape.kind)];
  if (kind < 0 || kind >= static_cast<int>(system.kinds.size())) {
    throw InfeasibleError(baseline + ": the system pins no device kind for op '" +
                          std::string(kernels::to_string(k.shape.kind)) + "' (kernel " + k.name + ")");
  }
  return kind;
}

}  // namespace

Plan baseline(const std::string& name, const SystemSpec& system, const CostModel& model,
              const Workload& workload, const ObjectiveSpec& objective) {
  const auto start = std::chrono::steady_clock::now();
  system.validate();
  auto done = [&](Plan p, const std::string& note) {
    p.solver = name;
    p.note = note;
    p.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return p;
  };
  for (std::size_t t = 0; t < system.kinds.size(); ++t) {
    if (name == system.kinds[t].name + "-only") {
      return done(only(static_cast<int>(t), system, model, objective), "best plan on " + system.kinds[t].name + " alone");
    }
  }
  if (name.size() > 5 && name.ends_with("-only")) {
    throw InfeasibleError(name + ": the system has no device kind '" + name.substr(0, name.size() - 5) + "'");
  }
  if (name == "theoretical-additive") {
    double throughput = 0, power = 0;
    std::string parts;
    for (std::size_t t = 0; t < system.kinds.size(); ++t) {
      if (system.kinds[t].count == 0) continue;
      Plan p;
      try {
        p = only(static_cast<int>(t), system, model, {Objective::perf});
      } catch (const InfeasibleError&) {
        continue;  // this kind cannot run the whole model on its own
      }
      throughput += p.throughput_per_s;
      power += p.energy_j * p.throughput_per_s;
      parts += (parts.empty() ? "" : " + ") + system.kinds[t].name + "-only " + p.mnemonic;
    }
    if (throughput <= 0) throw InfeasibleError("theoretical-additive: no kind can run the model alone");
    Plan p;
    for (const auto& k : system.kinds) p.kind_names.push_back(k.name);
    p.mnemonic = "additive";
    p.throughput_per_s = throughput;
    p.period_s = 1.0 / throughput;
    p.energy_j = power / throughput;
    p.latency_s = kInf;
    p.devices_used = system.total_devices();
    p.objective = "perf";
    p.score = p.period_s;
    return done(p, "sum of the homogeneous throughputs: " + parts);
  }
  if (name == "fleetrec") {
    SpaceLimits lim;
    for (const Kernel& k : workload.kernels) lim.allowed_kinds.push_back(1u << pinned_kind(system, k, name));
    return done(solve(system, model, objective, SolverKind::exact, lim), "kind per kernel fixed by op, counts optimised");
  }
  if (name == "static") {
    const CostTables tables(system, model);
    std::vector<StageSpec> specs;
    std::vector<int> kinds;
    for (int i = 0; i < workload.size(); ++i) {
      const int kind = pinned_kind(system, workload.kernels[i], name);
      if (!specs.empty() && kinds.back() == kind) {
        specs.back().last = i;
      } else {
        specs.push_back({i, i, 0});
        kinds.push_back(kind);
      }
    }
    std::vector<int> counts = system.static_counts;
    if (counts.empty()) {
      // Even split of each kind's devices over its stages, remainder to the earliest stages.
      std::vector<int> stages_of(system.kinds.size(), 0), seen(system.kinds.size(), 0);
      for (int k : kinds) ++stages_of[k];
      for (int k : kinds) {
        const int n = system.kinds[k].count, s = stages_of[k];
        counts.push_back(n / s + (seen[k]++ < n % s ? 1 : 0));
      }
    }
    if (counts.size() != specs.size()) {
      throw InputError("system.baselines.static_counts", "has " + std::to_string(counts.size()) +
                                                             " entries, the static mapping forms " +
                                                             std::to_string(specs.size()) + " stages");
    }
    std::vector<int> used(system.kinds.size(), 0);
    for (std::size_t s = 0; s < specs.size(); ++s) {
      used[kinds[s]] += counts[s];
      if (counts[s] < 1 || used[kinds[s]] > system.kinds[kinds[s]].count) {
        throw InfeasibleError("static: " + std::to_string(specs.size()) + " stages need more " +
                              system.kinds[kinds[s]].name + " devices than the system has");
      }
      specs[s].kc = tables.kc({kinds[s], counts[s]});
    }
    Plan p = evaluate(specs, tables);
    p.objective = to_string(objective.objective);
    p.score = objective.objective == Objective::perf ? p.period_s : p.energy_j;
    explain(p, tables, objective);
    return done(p, "fixed op->kind mapping and fixed counts");
  }
  throw InputError("baseline", "unknown baseline '" + name + "'");
}

}  // namespace dype::sched
