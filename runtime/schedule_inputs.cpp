#include "runtime/schedule_inputs.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "hw/system.h"
#include "hw/system_config.h"
#include "kernels/error.h"
#include "perfmodel/model_store.h"
#include "runtime/perf_planner.h"
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
                                    const sched::InputCharacteristics& input, const std::string& perfmodels_dir) {
  return load_schedule_inputs(system_file, sched::load_model_config(model_file), input, perfmodels_dir);
}

ScheduleInputs load_schedule_inputs(const std::string& system_file, const sched::ModelConfig& model,
                                    const sched::InputCharacteristics& input, const std::string& perfmodels_dir) {
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
  // Fitted models per kind's timing device, where the folder has one for its device model.
  std::vector<std::optional<perf::ModelStore>> fitted(first.size());
  std::string fitted_ids;
  if (!perfmodels_dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(perfmodels_dir, ec))
      throw InputError("--perfmodels " + perfmodels_dir, "not a directory");
    for (std::size_t i = 0; i < first.size(); ++i) {
      if (!first[i]) continue;
      const std::string id = device_profile_id(system, *first[i]);
      const std::filesystem::path file = std::filesystem::path(perfmodels_dir) / (id + ".json");
      if (id.empty() || !std::filesystem::exists(file, ec)) continue;
      fitted[i] = perf::ModelStore::load(file, id);
      fitted_ids += (fitted_ids.empty() ? "" : ", ") + id;
    }
  }
  auto time_of = [&](std::size_t i, const kernels::OpShape& shape) {
    const hw::Device* d = first[i];
    if (!d) return sched::kInf;
    if (fitted[i] && d->supports(shape.kind)) {
      if (const perf::KernelModel* km = fitted[i]->find(shape.kind)) {
        const double t = km->predict(shape).seconds;
        if (std::isfinite(t) && t >= 0) return t;
      }
    }
    return modelled_kernel_time_s(system, *d, shape);
  };
  const int n = out.workload.size();
  std::vector<double> out_bytes(n), in_bytes(n);
  std::vector<std::vector<double>> times(n);
  std::vector<kernels::OpKind> ops(n);
  for (int k = 0; k < n; ++k) {
    const sched::Kernel& kernel = out.workload.kernels[k];
    ops[k] = kernel.shape.kind;
    out_bytes[k] = kernel.output_bytes;
    in_bytes[k] = kernel.input_bytes;
    for (std::size_t i = 0; i < first.size(); ++i) times[k].push_back(time_of(i, kernel.shape));
  }
  auto additive = std::make_unique<sched::AdditiveCostModel>(out.system, out_bytes, in_bytes, times, 0.9, ops);
  std::vector<kernels::OpShape> shapes;
  for (const sched::Kernel& kernel : out.workload.kernels) shapes.push_back(kernel.shape);
  additive->set_shapes(std::move(shapes));
  out.model = std::move(additive);
  out.cost_source = fitted_ids.empty()
                        ? "device models of " + system_file + " (modelled)"
                        : "fitted perf models in " + perfmodels_dir + " (" + fitted_ids +
                              "), device models of " + system_file + " for the rest (modelled)";
  return out;
}

}  // namespace dype::rt
