#include "runtime/planning/schedule_inputs.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "hw/kernel_timing_model.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "common/error.h"
#include "perfmodel/model_store.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/planner.h"
#include "runtime/planning/schedule_runtime.h"

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

}  // namespace

void apply_baselines(const hw::SystemConfig& cfg, sched::SystemSpec& spec,
                     const std::function<bool(int, kernels::OpKind)>& supports) {
  for (const auto& [op_name, kind_name] : cfg.baseline_op_kind) {
    const auto op = kernels::op_kind_from_string(op_name);
    int kind = spec.kind_index(kind_name);
    for (int t = 0; kind < 0 && op && t < static_cast<int>(spec.kinds.size()); ++t)
      if (spec.kinds[static_cast<std::size_t>(t)].name.rfind(kind_name + ":", 0) == 0 && supports(t, *op)) kind = t;
    // A pinned kind with no schedulable device leaves the op unpinned: the baseline then reports
    // that it cannot be formed, naming the op.
    if (op && kind >= 0) spec.op_kind[static_cast<std::size_t>(*op)] = kind;
  }
  spec.static_counts = cfg.baseline_static_counts;
}

ScheduleInputs load_schedule_inputs(const std::string& system_file, const std::string& model_file,
                                    const sched::InputCharacteristics& input, const std::string& perfmodels_dir) {
  return load_schedule_inputs(system_file, sched::load_model_config(model_file), input, perfmodels_dir);
}

ScheduleInputs load_schedule_inputs(const std::string& system_file, const sched::ModelConfig& model,
                                    const sched::InputCharacteristics& input, const std::string& perfmodels_dir,
                                    const FpgaImages* images, const ImageAssignment* assignment,
                                    CostModelChoice cost_model) {
  ScheduleInputs out;
  out.workload = sched::build_workload(model, input);
  const std::string text = read_text(system_file);
  std::string fallback;
  if (cost_model == CostModelChoice::runtime && is_device_inventory(text)) {
    if (auto spec = runtime_model_spec(model, input))
      return runtime_schedule_inputs(system_file, *spec, input, perfmodels_dir, images, assignment,
                                     std::move(out.workload));
    fallback = "; the additive model: the runtime does not run this config's kernel chain";
  }
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
  // The FPGA kind split by image: image_of[t] is kind t's image (null for the other kinds).
  std::vector<const hw::Bitstream*> image_of(out.system.kinds.size(), nullptr);
  const hw::DeviceProfile* board = nullptr;
  if (images && assignment) {
    const int f = out.system.kind_index("fpga");
    for (const hw::DeviceConfig& d : cfg.devices)
      if (d.kind == hw::DeviceKind::fpga && d.schedulable && d.profile) board = &*d.profile;
    if (f < 0 || !board || assignment->size() != images->options.size())
      throw Error("image assignment: the system has no schedulable FPGAs of one board to assign");
    const sched::DeviceKindSpec fpga = out.system.kinds[static_cast<std::size_t>(f)];
    out.system.kinds.erase(out.system.kinds.begin() + f);
    image_of.erase(image_of.begin() + f);
    for (std::size_t i = 0; i < images->options.size(); ++i) {
      if ((*assignment)[i] == 0) continue;
      const hw::Bitstream& b = images->options[i].bitstream;
      sched::DeviceKindSpec k = fpga;
      k.name = "fpga:" + b.name;
      k.count = (*assignment)[i];
      double dynamic = 0.0;
      for (const auto& bk : b.kernels) dynamic = std::max(dynamic, bk.dynamic_w);
      k.power.exec_w = std::max(k.power.exec_w, k.power.idle_w + dynamic);
      out.system.kinds.push_back(k);
      image_of.push_back(&b);
    }
  }
  apply_baselines(cfg, out.system, [&](int t, kernels::OpKind op) {
    const hw::Bitstream* b = image_of[static_cast<std::size_t>(t)];
    return !b || hw::timing::model_supports(*board, b, op);
  });
  // Each kind is timed on its first schedulable device (the kinds are homogeneous); an image
  // kind from its manifest.
  std::vector<const hw::Device*> first;
  for (std::size_t t = 0; t < out.system.kinds.size(); ++t) {
    const auto& kind = out.system.kinds[t];
    const hw::Device* f = nullptr;
    if (image_of[t]) {
      first.push_back(nullptr);
      continue;
    }
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
    if (const hw::Bitstream* b = image_of[i]) {
      if (!hw::timing::model_supports(*board, b, shape.kind)) return sched::kInf;
      return hw::timing::modelled_time_s(*board, b, shape, out.system.kinds[i].name);
    }
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
  // Each kernel's execute power per kind: the device's figure for its op, an image's from the
  // manifest (idle + the kernel's dynamic power, paper Table II).
  auto power_of = [&](std::size_t i, kernels::OpKind op) {
    const sched::DeviceKindSpec& kind = out.system.kinds[i];
    if (const hw::Bitstream* b = image_of[i]) {
      const hw::BitstreamKernel* bk = b->find(op);
      return bk ? kind.power.idle_w + bk->dynamic_w : kind.power.exec_w;
    }
    return first[i] ? first[i]->info().power.execute_w_for(op) : kind.power.exec_w;
  };
  std::vector<std::vector<double>> power(n);
  for (int k = 0; k < n; ++k) {
    const sched::Kernel& kernel = out.workload.kernels[k];
    ops[k] = kernel.shape.kind;
    out_bytes[k] = kernel.output_bytes;
    in_bytes[k] = kernel.input_bytes;
    for (std::size_t i = 0; i < first.size(); ++i) {
      times[k].push_back(time_of(i, kernel.shape));
      power[k].push_back(power_of(i, kernel.shape.kind));
    }
  }
  auto additive = std::make_unique<sched::AdditiveCostModel>(out.system, out_bytes, in_bytes, times, 0.9, ops);
  std::vector<kernels::OpShape> shapes;
  for (const sched::Kernel& kernel : out.workload.kernels) shapes.push_back(kernel.shape);
  additive->set_shapes(std::move(shapes));
  additive->set_kernel_power(power);
  out.model = std::move(additive);
  const std::string image_source =
      images && assignment ? "; FPGA images " + describe(*images, *assignment) + " timed from their manifests" : "";
  out.cost_source = fitted_ids.empty()
                        ? "device models of " + system_file + " (modelled)"
                        : "fitted perf models in " + perfmodels_dir + " (" + fitted_ids +
                              "), device models of " + system_file + " for the rest (modelled)";
  out.cost_source += image_source + fallback;
  return out;
}

}  // namespace dype::rt
