#include "scheduler/baselines.h"

#include <algorithm>
#include <chrono>

#include "scheduler/recurrent.h"

namespace dype::sched {

namespace {

// A kind's family: its name up to a ':' ("fpga:u280-sextans-gemm" is an FPGA with that image).
std::string family(const std::string& kind) { return kind.substr(0, kind.find(':')); }

// The families in order of first appearance, each with its kinds.
std::vector<std::pair<std::string, std::vector<int>>> families(const SystemSpec& system) {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (std::size_t t = 0; t < system.kinds.size(); ++t) {
    const std::string f = family(system.kinds[t].name);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == f; });
    if (it == out.end()) out.push_back({f, {static_cast<int>(t)}});
    else it->second.push_back(static_cast<int>(t));
  }
  return out;
}

}  // namespace

std::vector<std::string> baseline_names(const SystemSpec& system) {
  std::vector<std::string> names;
  for (const auto& [f, kinds] : families(system)) names.push_back(f + "-only");
  names.insert(names.end(), {"theoretical-additive", "static", "fleetrec"});
  return names;
}

namespace {

// The best plan on the kinds of one family alone.
Plan only(const std::string& name, const std::vector<int>& kinds, const SystemSpec& system, const CostModel& model,
          const std::vector<Shape>& shapes, const ObjectiveSpec& objective) {
  SpaceLimits lim;
  lim.max_count.assign(system.kinds.size(), 0);
  int devices = 0;
  for (int kind : kinds) devices += lim.max_count[kind] = system.kinds[kind].count;
  if (devices == 0) throw InfeasibleError(name + "-only: the system has no " + name);
  Plan p = solve_shapes(system, model, shapes, objective, SolverKind::exact, lim);
  p.solver = name + "-only";
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
  const std::vector<Shape> shapes = recurrent_shapes(workload);
  auto done = [&](Plan p, const std::string& note) {
    p.solver = name;
    p.note = note;
    p.solve_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return p;
  };
  for (const auto& [f, kinds] : families(system)) {
    if (name == f + "-only") return done(only(f, kinds, system, model, shapes, objective), "best plan on " + f + " alone");
  }
  if (name.size() > 5 && name.ends_with("-only")) {
    throw InfeasibleError(name + ": the system has no device kind '" + name.substr(0, name.size() - 5) + "'");
  }
  if (name == "theoretical-additive") {
    // The paper's definition (Section VI): the homogeneous systems side by side, throughputs
    // summed, energy efficiency (inferences per joule) averaged over them.
    TheoreticalAdditive sum;
    std::string parts, left_out;
    for (const auto& [f, kinds] : families(system)) {
      Plan p;
      try {
        p = only(f, kinds, system, model, shapes, {Objective::perf});
      } catch (const InfeasibleError& e) {
        left_out += (left_out.empty() ? "" : "; ") + f + "-only left out (" + e.what() + ")";
        continue;
      }
      sum.add(p.throughput_per_s, p.energy_j);
      parts += (parts.empty() ? "" : " + ") + f + "-only " + p.mnemonic;
    }
    if (sum.throughput_per_s <= 0) throw InfeasibleError("theoretical-additive: no kind can run the model alone");
    Plan p;
    for (const auto& k : system.kinds) p.kind_names.push_back(k.name);
    if (!system.hosts.empty())
      for (int t = 0; t < static_cast<int>(system.kinds.size()); ++t) p.kind_hosts.push_back(system.host_name(t));
    p.mnemonic = "additive";
    p.throughput_per_s = sum.throughput_per_s;
    p.period_s = 1.0 / sum.throughput_per_s;
    p.energy_j = sum.energy_j();
    p.latency_s = kInf;
    p.devices_used = system.total_devices();
    p.objective = "perf";
    p.score = p.period_s;
    return done(p, "throughputs summed, energy efficiencies averaged: " + parts + (left_out.empty() ? "" : "; " + left_out));
  }
  if (name == "fleetrec") {
    SpaceLimits lim;
    for (const Kernel& k : workload.kernels) lim.allowed_kinds.push_back(1u << pinned_kind(system, k, name));
    return done(solve_shapes(system, model, shapes, objective, SolverKind::exact, lim),
                "kind per kernel fixed by op, counts optimised");
  }
  if (name == "static") {
    // The flat mapping when the system has a device for each of its stages; otherwise (a deep
    // model alternating kinds, the transformer's 32 x GEMM | attention | GEMMs) the same mapping
    // over one round of the recurrent shape with the fewest rounds that fits.
    std::vector<Shape> tried{{1, workload.size()}};
    for (auto it = shapes.rbegin(); it != shapes.rend(); ++it) tried.push_back(*it);
    std::string why;
    for (const Shape& shape : tried) {
      std::vector<StageSpec> specs;
      std::vector<int> kinds;
      for (int i = 0; i < shape.round_kernels; ++i) {
        const int kind = pinned_kind(system, workload.kernels[static_cast<std::size_t>(i)], name);
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
          const int n = system.kinds[k].count, st = stages_of[k];
          counts.push_back(n / st + (seen[k]++ < n % st ? 1 : 0));
        }
      }
      if (counts.size() != specs.size()) {
        why = "system.baselines.static_counts has " + std::to_string(counts.size()) + " entries, the static mapping forms " +
              std::to_string(specs.size()) + " stages";
        continue;
      }
      std::vector<int> used(system.kinds.size(), 0);
      bool fits = true;
      for (std::size_t st = 0; st < specs.size() && fits; ++st) {
        used[kinds[st]] += counts[st];
        if (counts[st] < 1 || used[kinds[st]] > system.kinds[kinds[st]].count) {
          why = std::to_string(specs.size()) + " stages need more " + system.kinds[kinds[st]].name + " devices than the system has";
          fits = false;
        }
      }
      if (!fits) continue;
      const CostTables counted(system, model);  // kc numbering only: the same for every shape
      for (std::size_t st = 0; st < specs.size(); ++st) specs[st].kc = counted.kc({kinds[st], counts[st]});
      Plan p = evaluate_recurrent(specs, system, model, shape);
      p.objective = to_string(objective.objective);
      p.score = objective.objective == Objective::perf ? p.period_s : p.energy_j;
      if (shape.rounds == 1) explain(p, counted, objective);
      return done(p, "fixed op->kind mapping and fixed counts" +
                         (shape.rounds > 1 ? ", per round of " + std::to_string(shape.round_kernels) + " kernels" : std::string()));
    }
    throw InfeasibleError("static: " + why);
  }
  throw InputError("baseline", "unknown baseline '" + name + "'");
}

}  // namespace dype::sched
