#include "scheduler/plan.h"

#include <algorithm>

#include "common/error.h"
#include "scheduler/solver/figures.h"

namespace dype::sched {

const char* to_string(Objective objective) {
  switch (objective) {
    case Objective::perf: return "perf";
    case Objective::energy: return "energy";
    case Objective::balanced: return "balanced";
    case Objective::qos: return "qos";
    case Objective::latency: return "latency";
  }
  return "unknown";
}

Objective objective_from_string(const std::string& name) {
  for (Objective o : {Objective::perf, Objective::energy, Objective::balanced, Objective::qos, Objective::latency}) {
    if (name == to_string(o)) return o;
  }
  throw InputError("objective", "unknown objective '" + name + "' (perf, energy, balanced, qos, latency)");
}

std::string mnemonic(const std::vector<StageSpec>& stages, const CostTables& tables) {
  std::string m;
  for (const StageSpec& s : stages) {
    const DeviceGroup g = tables.group(s.kc);
    m += std::to_string(g.count);
    m += tables.letter(g.kind);
  }
  return m;
}

Plan evaluate(const std::vector<StageSpec>& specs, const CostTables& tables) {
  Plan plan;
  for (int t = 0; t < tables.num_kinds(); ++t) plan.kind_names.push_back(tables.kind_name(t));
  for (int t = 0; t < tables.num_kinds() && !tables.host_name(t).empty(); ++t)
    plan.kind_hosts.push_back(tables.host_name(t));
  if (specs.empty()) return plan;
  std::vector<int> used(tables.num_kinds(), 0);
  int expect = 0;
  for (std::size_t s = 0; s < specs.size(); ++s) {
    const StageSpec& sp = specs[s];
    if (sp.first != expect || sp.last < sp.first || sp.last >= tables.num_kernels()) {
      throw Error("evaluate: stages do not cover the kernels contiguously");
    }
    expect = sp.last + 1;
    const DeviceGroup g = tables.group(sp.kc);
    used[g.kind] += g.count;
    Stage st;
    st.first = sp.first;
    st.last = sp.last;
    st.kind = g.kind;
    st.count = g.count;
    st.compute_s = tables.compute(sp.first, sp.last, sp.kc);
    st.copy_s = tables.copy(sp.first, sp.last, sp.kc);
    st.waited_copy_s = tables.waited(sp.first, sp.last, sp.kc);
    st.copy_in_s = tables.copy_in(sp.first, sp.last, sp.kc);
    st.copy_out_s = tables.copy_out(sp.first, sp.last, sp.kc);
    st.blocked_s = tables.blocked(sp.first, sp.last, sp.kc);
    st.overlap = tables.overlap();
    if (s > 0) {
      st.transfer_in_s = tables.transfer_in(sp.first - 1, specs[s - 1].kc, sp.kc);
      plan.stages.back().transfer_out_s = tables.transfer_out(sp.first - 1, specs[s - 1].kc, sp.kc);
    }
    plan.stages.push_back(st);
  }
  if (expect != tables.num_kernels()) throw Error("evaluate: stages do not cover every kernel");
  plan.stages.front().transfer_in_s = tables.entry(specs.front().kc);
  plan.stages.back().transfer_out_s = tables.exit(specs.back().kc);
  for (std::size_t s = 0; s < specs.size(); ++s)
    plan.stages[s].stall_s = tables.stall(plan.stages[s].transfer_in_s, specs[s].first, specs[s].last, specs[s].kc);
  bool fits = true;
  for (int t = 0; t < tables.num_kinds(); ++t) fits = fits && used[t] <= tables.max_count(t);
  plan.mnemonic = mnemonic(specs, tables);
  const Figures f = figures(specs, tables);
  plan.devices_used = f.devices;
  if (!fits || !(f.period < kInf)) {
    plan.note = fits ? "a stage's kind cannot run its kernels" : "uses more devices than available";
    return plan;  // period/energy stay kInf: infeasible
  }
  plan.period_s = f.period;
  plan.throughput_per_s = f.period > 0 ? 1.0 / f.period : kInf;
  plan.latency_s = f.latency;
  plan.energy_j = f.energy;
  return plan;
}

std::string Plan::where(int kind) const {
  const auto k = static_cast<std::size_t>(kind);
  const std::string name = k < kind_names.size() ? kind_names[k] : "?";
  return k < kind_hosts.size() ? kind_hosts[k] + ":" + name : name;
}

nlohmann::json to_json(const Plan& plan) {
  using nlohmann::json;
  auto num = [](double v) { return v < kInf ? json(v) : json(nullptr); };
  json stages = json::array();
  for (const Stage& s : plan.stages) {
    json j = {{"kernels", {s.first, s.last}},
              {"kind", s.kind < static_cast<int>(plan.kind_names.size()) ? plan.kind_names[s.kind] : "?"},
              {"count", s.count},
              {"compute_s", num(s.compute_s)},
              {"copy_s", s.copy_s},
              {"copy_in_s", s.copy_in_s},
              {"copy_out_s", s.copy_out_s},
              {"blocked_s", s.blocked_s},
              {"stall_s", s.stall_s},
              {"transfer_in_s", s.transfer_in_s},
              {"transfer_out_s", s.transfer_out_s},
              {"stage_time_s", num(s.time_s())}};
    if (!plan.kind_hosts.empty()) {  // a multi-host system: where the stage runs, host:kind
      j["host"] = s.kind < static_cast<int>(plan.kind_hosts.size()) ? plan.kind_hosts[s.kind] : "?";
      j["where"] = plan.where(s.kind);
    }
    if (!s.why.empty()) j["why"] = s.why;
    if (!s.runner_up.empty()) {
      j["runner_up"] = {{"group", s.runner_up}, {"score", num(s.runner_up_score)}};
    }
    stages.push_back(std::move(j));
  }
  json out = {{"mnemonic", plan.mnemonic},
              {"stages", stages},
              {"period_s", num(plan.period_s)},
              {"throughput_per_s", plan.throughput_per_s},
              {"latency_s", num(plan.latency_s)},
              {"energy_j_per_inference", num(plan.energy_j)},
              {"devices_used", plan.devices_used},
              {"solve_time_s", plan.solve_time_s},
              {"objective", plan.objective},
              {"solver", plan.solver},
              {"figures", "modelled"}};
  if (!plan.note.empty()) out["note"] = plan.note;
  if (plan.rounds > 1) {
    out["rounds"] = plan.rounds;  // stages' kernels are those of one round
    out["round_kernels"] = plan.round_kernels;
  }
  return out;
}

}  // namespace dype::sched
