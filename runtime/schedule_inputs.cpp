#include "runtime/schedule_inputs.h"

#include <fstream>
#include <sstream>

#include "hw/system.h"
#include "hw/system_config.h"
#include "kernels/error.h"
#include "runtime/planner.h"

namespace dype::rt {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open system file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A device inventory lists `devices:`; the scheduler's own format lists `kinds:`.
bool is_device_inventory(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("devices:", 0) == 0) return true;
    if (line.rfind("kinds:", 0) == 0) return false;
  }
  return true;  // let the inventory parser report what is missing
}

void apply_baselines(const hw::SystemConfig& cfg, sched::SystemSpec& spec) {
  for (const auto& [op_name, kind_name] : cfg.baseline_op_kind) {
    const auto op = kernels::op_kind_from_string(op_name);
    const int kind = spec.kind_index(kind_name);
    // A pinned kind with no schedulable device leaves the op unpinned: the baseline then reports
    // that it cannot be formed, naming the op.
    if (op && kind >= 0) spec.op_kind[static_cast<std::size_t>(*op)] = kind;
  }
  spec.static_counts = cfg.baseline_static_counts;
}

}  // namespace

ScheduleInputs load_schedule_inputs(const std::string& system_file, const std::string& model_file,
                                    const sched::InputCharacteristics& input) {
  return load_schedule_inputs(system_file, sched::load_model_config(model_file), input);
}

ScheduleInputs load_schedule_inputs(const std::string& system_file, const sched::ModelConfig& model,
                                    const sched::InputCharacteristics& input) {
  ScheduleInputs out;
  out.workload = sched::build_workload(model, input);
  const std::string text = read_text(system_file);
  if (!is_device_inventory(text)) {
    out.system = sched::parse_system_spec(text, system_file);
    out.model = std::make_unique<sched::AdditiveCostModel>(
        sched::AdditiveCostModel::from_gflops(out.system, out.workload));
    out.cost_source = "per-kind effective GFLOP/s from " + system_file + " (modelled)";
    return out;
  }
  const hw::SystemConfig cfg = hw::load_system_config(system_file);
  const hw::System system = hw::System::from_config(cfg);
  out.system = scheduler_system_spec(system, {});
  out.system.name = cfg.name;
  apply_baselines(cfg, out.system);
  // Each kind is timed on its first schedulable device (the kinds are homogeneous).
  std::vector<const hw::Device*> first;
  for (const auto& kind : out.system.kinds) {
    const hw::Device* f = nullptr;
    for (const hw::Device* d : system.devices_of(*hw::device_kind_from_string(kind.name))) {
      const hw::DeviceConfig* dc = cfg.find(d->name());
      if (!dc || dc->schedulable) {
        f = d;
        break;
      }
    }
    first.push_back(f);
  }
  const int n = out.workload.size();
  std::vector<double> out_bytes(n), in_bytes(n);
  std::vector<std::vector<double>> times(n);
  std::vector<kernels::OpKind> ops(n);
  for (int k = 0; k < n; ++k) {
    const sched::Kernel& kernel = out.workload.kernels[k];
    ops[k] = kernel.shape.kind;
    out_bytes[k] = kernel.output_bytes;
    in_bytes[k] = kernel.input_bytes;
    for (const hw::Device* d : first) {
      times[k].push_back(d ? modelled_kernel_time_s(system, *d, kernel.shape) : sched::kInf);
    }
  }
  out.model = std::make_unique<sched::AdditiveCostModel>(out.system, out_bytes, in_bytes, times, 0.9, ops);
  out.cost_source = "device models of " + system_file + " (modelled)";
  return out;
}

}  // namespace dype::rt
