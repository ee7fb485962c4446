#include "runtime/planner.h"

#include "hw/emu/emu_device.h"
#include "hw/emu/emu_timing.h"
#include "kernels/error.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"

namespace dype::rt {

namespace {

const hw::DeviceKind kKinds[] = {hw::DeviceKind::gpu, hw::DeviceKind::fpga, hw::DeviceKind::cpu};

char letter(hw::DeviceKind k) {
  switch (k) {
    case hw::DeviceKind::gpu: return 'G';
    case hw::DeviceKind::fpga: return 'F';
    case hw::DeviceKind::cpu: return 'C';
  }
  return '?';
}

bool usable(const hw::System& sys, const hw::Device* d, const std::set<std::string>& excluded) {
  const hw::DeviceConfig* cfg = sys.config().find(d->name());
  return !excluded.count(d->name()) && (!cfg || cfg->schedulable);
}

}  // namespace

double modelled_kernel_time_s(const hw::System& sys, const hw::Device& d, const kernels::OpShape& shape) {
  if (!d.supports(shape.kind)) return sched::kInf;
  if (const auto* emu = dynamic_cast<const hw::EmuDevice*>(&d)) return emu->modelled_time_s(shape);
  const hw::DeviceConfig* cfg = sys.config().find(d.name());
  if (cfg && cfg->model) {
    try {
      return hw::emu::modelled_time_s(*cfg->model, nullptr, shape, d.name());
    } catch (const Error&) {
      return sched::kInf;
    }
  }
  return sched::kInf;
}

SchedPlanner::SchedPlanner(const Model& model, const hw::System& system, sched::SolverKind solver)
    : model_(model), system_(system), solver_(solver) {}

sched::SystemSpec SchedPlanner::system_spec(const std::set<std::string>& excluded) const {
  return scheduler_system_spec(system_, excluded);
}

sched::SystemSpec scheduler_system_spec(const hw::System& system, const std::set<std::string>& excluded) {
  sched::SystemSpec spec;
  spec.name = system.config().name;
  spec.inter_socket_bw_bytes_per_s = system.topology().inter_socket_bytes_per_s();
  for (hw::DeviceKind kind : kKinds) {
    std::vector<hw::Device*> ds;
    for (hw::Device* d : system.devices_of(kind))
      if (usable(system, d, excluded)) ds.push_back(d);
    if (ds.empty()) continue;
    const hw::Device& d0 = *ds.front();
    sched::DeviceKindSpec k;
    k.name = std::string(hw::to_string(kind));
    k.letter = letter(kind);
    k.count = static_cast<int>(ds.size());
    k.power.idle_w = d0.info().power.idle_w;
    k.power.exec_w = std::max(d0.info().power.execute_w, k.power.idle_w);
    k.power.xfer_w = std::max(d0.info().power.transfer_w, k.power.idle_w);
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
    k.host = kind == hw::DeviceKind::cpu;
    spec.kinds.push_back(k);
  }
  if (spec.kinds.empty()) throw Error("planner: no schedulable device left");
  return spec;
}

sched::AdditiveCostModel SchedPlanner::cost_model(const sched::SystemSpec& spec, const Characteristics& c) const {
  const auto shapes = model_.kernel_shapes(c);
  const int n = model_.num_kernels();
  std::vector<double> out(static_cast<std::size_t>(n)), in(static_cast<std::size_t>(n));
  std::vector<std::vector<double>> times(static_cast<std::size_t>(n));
  const double input_bytes = 4.0 * static_cast<double>(model_.is_gnn() ? c.nodes : c.seq_len) *
                             static_cast<double>(model_.is_gnn() ? model_.spec().in_features : model_.spec().d_model);
  for (int k = 0; k < n; ++k) {
    out[k] = model_.output_bytes(k, c);
    in[k] = k == 0 ? input_bytes : out[k - 1];
    for (const auto& kind : spec.kinds) {
      auto hk = hw::device_kind_from_string(kind.name);
      auto ds = system_.devices_of(*hk);
      times[k].push_back(ds.empty() ? sched::kInf : modelled_kernel_time_s(system_, *ds.front(), shapes[k]));
    }
  }
  std::vector<kernels::OpKind> ops;
  for (const auto& sh : shapes) ops.push_back(sh.kind);
  return sched::AdditiveCostModel(spec, out, in, times, 0.9, ops);
}

PipelineSpec to_pipeline_spec(const sched::Plan& plan, const hw::System& system,
                              const std::set<std::string>& excluded) {
  PipelineSpec spec;
  spec.label = plan.mnemonic;
  std::set<std::string> taken;
  for (const auto& st : plan.stages) {
    const std::string& kname = plan.kind_names.at(static_cast<std::size_t>(st.kind));
    auto kind = hw::device_kind_from_string(kname);
    if (!kind) throw Error("plan names unknown device kind '" + kname + "'");
    PipelineStage ps;
    ps.first = st.first;
    ps.last = st.last;
    ps.predicted_s = st.compute_s;
    for (hw::Device* d : system.devices_of(*kind)) {
      if (static_cast<int>(ps.devices.size()) == st.count) break;
      if (!usable(system, d, excluded) || taken.count(d->name())) continue;
      taken.insert(d->name());
      ps.devices.push_back(d);
    }
    if (static_cast<int>(ps.devices.size()) < st.count)
      throw Error("plan " + plan.mnemonic + " needs " + std::to_string(st.count) + " " + kname + " devices");
    spec.stages.push_back(std::move(ps));
  }
  return spec;
}

PlannedPipeline SchedPlanner::plan(const Characteristics& c, const std::string& mode,
                                   const std::set<std::string>& excluded) {
  const sched::SystemSpec spec = system_spec(excluded);
  const auto model = cost_model(spec, c);
  sched::ObjectiveSpec obj;
  obj.objective = sched::objective_from_string(mode);
  const sched::Plan p = sched::solve(spec, model, obj, solver_);
  if (p.empty()) throw Error("planner: no feasible plan for objective " + mode);
  PlannedPipeline out;
  out.spec = to_pipeline_spec(p, system_, excluded);
  out.mnemonic = p.mnemonic;
  out.period_s = p.period_s;
  out.energy_j = p.energy_j;
  return out;
}

double SchedPlanner::predict_period_s(const PipelineSpec& ps, const Characteristics& c) {
  const sched::SystemSpec spec = system_spec({});
  const auto model = cost_model(spec, c);
  const sched::CostTables tables(spec, model);
  std::vector<sched::StageSpec> stages;
  for (const auto& st : ps.stages) {
    const int kind = spec.kind_index(std::string(hw::to_string(st.devices.front()->kind())));
    if (kind < 0) return sched::kInf;
    stages.push_back({st.first, st.last, tables.kc({kind, static_cast<int>(st.devices.size())})});
  }
  return sched::evaluate(stages, tables).period_s;
}

}  // namespace dype::rt
