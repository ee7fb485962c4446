#include "runtime/planning/planner.h"

#include <algorithm>

#include "hw/device_profile.h"
#include "hw/kernel_timing_model.h"
#include "hw/topology.h"
#include "common/error.h"
#include "runtime/rows_needed.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"

namespace dype::rt {

namespace {

char letter(hw::DeviceKind k) {
  switch (k) {
    case hw::DeviceKind::gpu: return 'G';
    case hw::DeviceKind::fpga: return 'F';
    case hw::DeviceKind::cpu: return 'C';
  }
  return '?';
}

}  // namespace

double modelled_kernel_time_s(const hw::System& sys, const hw::Device& d, const kernels::OpShape& shape) {
  if (!d.supports(shape.kind)) return sched::kInf;
  if (const auto t = d.modelled_kernel_time_s(shape)) return *t;
  const hw::DeviceConfig* cfg = sys.config().find(d.name());
  if (cfg && cfg->profile) {
    try {
      return hw::profile_kernel_time_s(*cfg->profile, shape, d.name());
    } catch (const Error&) {
      return sched::kInf;
    }
  }
  return sched::kInf;
}

SchedPlanner::SchedPlanner(const Model& model, const hw::System& system, sched::SolverKind solver)
    : model_(model), system_(system), solver_(solver) {
  const hw::System* sys = &system;
  kernel_time_ = [sys](const hw::Device& d, const kernels::OpShape& shape) {
    return modelled_kernel_time_s(*sys, d, shape);
  };
}

sched::SystemSpec SchedPlanner::system_spec(const std::set<std::string>& excluded, const FpgaImagePlan* images) const {
  return scheduler_system_spec(system_, excluded, images);
}

sched::SystemSpec scheduler_system_spec(const hw::System& system, const std::set<std::string>& excluded,
                                        const FpgaImagePlan* images) {
  sched::SystemSpec spec;
  spec.name = system.config().name;
  spec.inter_socket_bw_bytes_per_s = system.topology().inter_socket_bytes_per_s();
  spec.transfers = system.config().overlap_transfers ? sched::TransferMode::overlap : sched::TransferMode::serial;
  for (const PlanningKind& pk : planning_kinds(system, excluded, images)) {
    const hw::Device& d0 = *pk.devices.front();
    sched::DeviceKindSpec k;
    k.name = pk.name;
    k.letter = letter(pk.kind);
    k.count = static_cast<int>(pk.devices.size());
    k.power.idle_w = d0.info().power.idle_w;
    k.power.exec_w = std::max(d0.info().power.execute_w, k.power.idle_w);
    k.power.xfer_w = std::max(d0.info().power.transfer_w, k.power.idle_w);
    if (pk.manifest) {
      // An image it does not hold yet: the board's idle power plus the image's dynamic power.
      double dynamic = 0.0;
      for (const auto& bk : pk.manifest->kernels) dynamic = std::max(dynamic, bk.dynamic_w);
      k.power.exec_w = k.power.idle_w + dynamic;
    }
    const int ti = d0.topology_index();
    if (ti >= 0) {
      const auto& td = system.topology().device(ti);
      k.link_bw_bytes_per_s = td.link.type == hw::LinkType::host ? td.link.host_bandwidth_bytes_per_s
                                                                 : td.link.bandwidth_bytes_per_s();
      k.link_latency_s = td.link.latency_s;
      k.socket = td.socket;
      k.p2p = td.p2p;
    } else {
      k.link_bw_bytes_per_s = 31.5e9;
      k.link_latency_s = 2e-6;
    }
    k.host = pk.kind == hw::DeviceKind::cpu;
    if (const std::string h = host_of_kind(pk.name); !h.empty()) {
      k.letter = static_cast<char>(std::tolower(static_cast<unsigned char>(k.letter)));  // "2g": on another host
      k.host_index = system.config().host_index(h);
    }
    // Host memory is not the constraint a device's is (and is shared with everything else).
    k.memory_bytes = k.host ? 0.0 : static_cast<double>(d0.info().memory_bytes);
    spec.kinds.push_back(k);
  }
  if (spec.kinds.empty()) throw Error("planner: no schedulable device left");
  for (const auto& h : system.config().hosts)
    spec.hosts.push_back({.name = h.name, .nic_bw_bytes_per_s = h.nic_bytes_per_s, .nic_latency_s = h.nic_latency_s});
  return spec;
}

RuntimeCostModel SchedPlanner::cost_model(const sched::SystemSpec& spec, const Characteristics& c,
                                          const std::set<std::string>& excluded, const FpgaImagePlan* images) const {
  return RuntimeCostModel(model_, system_, spec, excluded, c, kernel_time_, images);
}

std::vector<sched::Shape> recurrent_shapes(const Model& model) {
  std::vector<kernels::OpKind> ops;
  for (const Step& s : model.steps()) ops.push_back(s.op);
  return model.steps().empty() ? std::vector<sched::Shape>{} : sched::recurrent_shapes(ops, model.steps().back().layer + 1);
}

PipelineSpec to_pipeline_spec(const sched::Plan& plan, const hw::System& system,
                              const std::set<std::string>& excluded, const FpgaImagePlan* images) {
  PipelineSpec spec;
  spec.label = plan.mnemonic;
  std::set<std::string> taken;
  for (const auto& st : plan.stages) {
    const std::string& kname = plan.kind_names.at(static_cast<std::size_t>(st.kind));
    const hw::DeviceKind kind = device_kind_of(kname);
    PipelineStage ps;
    ps.first = st.first;
    ps.last = st.last;
    ps.predicted_s = st.compute_s;
    for (hw::Device* d : system.devices_of(kind)) {
      if (static_cast<int>(ps.devices.size()) == st.count) break;
      if (!usable(system, d, excluded) || taken.count(d->name()) || planning_kind_name(system, *d, images) != kname)
        continue;
      taken.insert(d->name());
      ps.devices.push_back(d);
    }
    if (static_cast<int>(ps.devices.size()) < st.count)
      throw Error("plan " + plan.mnemonic + " needs " + std::to_string(st.count) + " " + kname + " devices");
    spec.stages.push_back(std::move(ps));
  }
  if (plan.rounds > 1) {
    // Round r's stages: round 0's on the same devices, kernels shifted by r rounds; each stage's
    // prediction is its share of one round.
    const std::size_t per_round = spec.stages.size();
    for (auto& st : spec.stages) st.predicted_s /= plan.rounds;
    for (int r = 1; r < plan.rounds; ++r) {
      for (std::size_t s = 0; s < per_round; ++s) {
        PipelineStage ps = spec.stages[s];
        ps.first += r * plan.round_kernels;
        ps.last += r * plan.round_kernels;
        spec.stages.push_back(std::move(ps));
      }
    }
    spec.rounds = plan.rounds;
  }
  return spec;
}

void require_every_kernel_runs(const Model& model, const hw::System& system, const std::set<std::string>& excluded) {
  for (const Step& step : model.steps()) {
    std::string why;
    bool runs = false;
    for (hw::Device* d : system.devices()) {
      std::string reason;
      const hw::DeviceConfig* cfg = system.config().find(d->name());
      if (excluded.count(d->name())) reason = "drained or failed";
      else if (cfg && !cfg->schedulable) reason = "not schedulable";
      else if (d->supports(step.op)) runs = true;
      else if (d->info().kind == hw::DeviceKind::fpga)
        reason = d->bitstream() ? "bitstream '" + d->bitstream()->name + "' has no " + std::string(kernels::to_string(step.op))
                                : "no bitstream loaded";
      else reason = "does not run " + std::string(kernels::to_string(step.op));
      if (!reason.empty()) why += (why.empty() ? "" : "; ") + d->name() + ": " + reason;
    }
    if (runs) continue;
    throw Error("kernel '" + step.name + "' (" + std::string(kernels::to_string(step.op)) +
                ") has no device to run on (" + (why.empty() ? "the system has no devices" : why) + ")");
  }
}

sched::Plan SchedPlanner::solve(const Characteristics& c, const sched::ObjectiveSpec& objective,
                                const std::set<std::string>& excluded, const FpgaImagePlan* images) const {
  const sched::SystemSpec spec = system_spec(excluded, images);
  const auto model = cost_model(spec, c, excluded, images);
  sched::Plan p = sched::solve_shapes(spec, model, recurrent_shapes(model_), objective, solver_,
                                      sched::coordinator_recurrence(spec));
  if (p.empty()) throw sched::InfeasibleError(std::string("planner: no feasible plan for objective ") +
                                             sched::to_string(objective.objective));
  return p;
}

PlannedPipeline SchedPlanner::plan(const Characteristics& c, const std::string& mode,
                                   const std::set<std::string>& excluded) {
  require_every_kernel_runs(model_, system_, excluded);
  sched::ObjectiveSpec obj;
  obj.objective = sched::objective_from_string(mode);
  const sched::Plan p = solve(c, obj, excluded);
  PlannedPipeline out;
  out.spec = to_pipeline_spec(p, system_, excluded);
  out.mnemonic = p.mnemonic;
  out.period_s = p.period_s;
  out.energy_j = p.energy_j;
  out.score = p.score;
  out.cost_source = "device models (modelled ground truth)";
  return out;
}

sched::Plan SchedPlanner::evaluate(const PipelineSpec& ps, const Characteristics& c) const {
  const sched::SystemSpec spec = system_spec({});
  const auto model = cost_model(spec, c);
  const sched::CostTables tables(spec, model);
  std::vector<sched::StageSpec> stages;
  const int per_round = ps.stages_per_round();
  for (int s = 0; s < per_round; ++s) {
    const PipelineStage& st = ps.stages[static_cast<std::size_t>(s)];
    const int kind = spec.kind_index(planning_kind_name(system_, *st.devices.front()));
    if (kind < 0) return {};
    const int count = static_cast<int>(st.devices.size());
    if (count > tables.max_count(kind)) return {};  // the kind lost devices since
    stages.push_back({st.first, st.last, tables.kc({kind, count})});
  }
  if (ps.rounds > 1) {
    const int m = ps.stages[static_cast<std::size_t>(per_round - 1)].last + 1;
    return sched::evaluate_recurrent(stages, spec, model, {ps.rounds, m});
  }
  return sched::evaluate(stages, tables);
}

double SchedPlanner::predict_period_s(const PipelineSpec& ps, const Characteristics& c) {
  return evaluate(ps, c).period_s;
}

double SchedPlanner::predict_score(const PipelineSpec& ps, const Characteristics& c, const std::string& mode) {
  const sched::Plan p = evaluate(ps, c);
  const sched::Objective obj = sched::objective_from_string(mode);
  if (obj == sched::Objective::perf || !(p.period_s < sched::kInf)) return p.period_s;
  if (obj == sched::Objective::latency) return p.latency_s;
  if (obj == sched::Objective::balanced) {
    // The constraint the balanced plan was chosen under: throughput >= ratio x the perf optimum.
    const sched::SystemSpec spec = system_spec({});
    const auto model = cost_model(spec, c);
    sched::ObjectiveSpec perf;
    const sched::Plan best = sched::solve_shapes(spec, model, recurrent_shapes(model_), perf, solver_,
                                                     sched::coordinator_recurrence(spec));
    const double ratio = sched::ObjectiveSpec{}.balance_ratio;
    if (!best.empty() && !sched::within(p.period_s, best.period_s / ratio)) return sched::kInf;
  }
  return p.energy_j;
}

}  // namespace dype::rt
