#include "runtime/planning/schedule_runtime.h"

#include <cmath>
#include <filesystem>

#include "hw/kernel_timing_model.h"
#include "hw/system_file.h"
#include "common/error.h"
#include "runtime/planning/image_planner.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/planning_kinds.h"

namespace dype::rt {

namespace {

std::int64_t dim_or(const sched::ModelConfig& c, const std::string& key, std::int64_t fallback) {
  for (const auto& [k, v] : c.dims)
    if (k == key) return v;
  return fallback;
}

// The config's chain of ops per layer, and whether its aggregation carries the node's own row.
std::vector<kernels::OpKind> layer_ops(const sched::ModelConfig& c, bool& with_self) {
  std::vector<kernels::OpKind> ops;
  with_self = false;
  for (const auto& t : c.layer) {
    ops.push_back(t.op);
    with_self |= t.with_self;
  }
  return ops;
}

}  // namespace

std::optional<ModelSpec> runtime_model_spec(const sched::ModelConfig& config, const sched::InputCharacteristics& input) {
  using kernels::OpKind;
  bool with_self = false;
  const auto ops = layer_ops(config, with_self);
  ModelSpec s;
  s.layers = config.layers;
  s.materialize_weights = false;
  if (config.family == "gnn") {
    s.in_features = input.feature_len;
    s.hidden = dim_or(config, "hidden", 128);
    if (ops == std::vector<OpKind>{OpKind::spmm, OpKind::gemm}) s.family = with_self ? ModelFamily::sage : ModelFamily::gcn;
    else if (ops == std::vector<OpKind>{OpKind::spmm, OpKind::gemm, OpKind::gemm} && !with_self) s.family = ModelFamily::gin;
    else return std::nullopt;
  } else if (config.family == "transformer") {
    if (ops != std::vector<OpKind>{OpKind::gemm, OpKind::window_attention, OpKind::gemm, OpKind::gemm, OpKind::gemm})
      return std::nullopt;
    s.family = ModelFamily::transformer;
    s.d_model = dim_or(config, "d_model", 512);
    s.heads = config.heads;
    s.ffn = dim_or(config, "ffn", 2048);
  } else {
    return std::nullopt;
  }
  // The same kernels with the same widths: every kernel hands on as many bytes as the config says.
  Model m = Model::make(s);
  const sched::Workload w = sched::build_workload(config, input);
  if (m.num_kernels() != w.size()) return std::nullopt;
  const Characteristics& c = input;
  for (int k = 0; k < w.size(); ++k) {
    const double want = w.kernels[static_cast<std::size_t>(k)].output_bytes, got = m.output_bytes(k, c);
    if (m.step(k).op != w.kernels[static_cast<std::size_t>(k)].shape.kind ||
        std::abs(got - want) > 1e-9 * std::max(std::abs(want), 1.0))
      return std::nullopt;
  }
  return s;
}

ScheduleInputs runtime_schedule_inputs(const std::string& system_file, const ModelSpec& spec,
                                       const sched::InputCharacteristics& input, const std::string& perfmodels_dir,
                                       const FpgaImages* images, const ImageAssignment* assignment,
                                       sched::Workload workload) {
  ScheduleInputs out;
  out.workload = std::move(workload);
  auto parts = std::make_shared<RuntimeParts>();
  const hw::SystemConfig cfg = hw::load_system_config(system_file);
  parts->system = std::make_unique<hw::System>(hw::System::from_config(cfg));
  parts->model = std::make_unique<Model>(Model::make(spec));
  std::error_code ec;
  if (!perfmodels_dir.empty() && !std::filesystem::is_directory(perfmodels_dir, ec))
    throw InputError("--perfmodels " + perfmodels_dir, "not a directory");
  auto stores = PerfModelPlanner::stores_for(*parts->system, perfmodels_dir);
  std::string source;
  if (!stores.empty()) {
    auto fitted = std::make_shared<PerfModelPlanner>(*parts->model, *parts->system, std::move(stores));
    source = "fitted perf models in " + perfmodels_dir + " (" + fitted->cost_source() + "), device models of " +
             system_file + " for the rest";
    parts->planner = fitted;
  } else {
    parts->planner = std::make_shared<SchedPlanner>(*parts->model, *parts->system);
    source = "device models of " + system_file;
  }
  FpgaImagePlan map;
  const FpgaImagePlan* what_if = nullptr;
  if (images && assignment) {
    map = assign_images(*parts->system, {}, *images, *assignment);
    what_if = &map;
    source += "; FPGA images " + describe(*images, *assignment) + " timed from their manifests";
  }
  out.system = parts->planner->system_spec({}, what_if);
  out.system.name = cfg.name;
  // Baseline pins (`baselines:` in the system file), by the planning kinds the spec was built from.
  const auto kinds = planning_kinds(*parts->system, {}, what_if);
  apply_baselines(cfg, out.system, [&](int t, kernels::OpKind op) {
    const PlanningKind& k = kinds[static_cast<std::size_t>(t)];
    if (k.manifest) return k.board && hw::timing::model_supports(*k.board, k.manifest, op);
    return k.devices.front()->supports(op);
  });
  out.model = std::make_unique<RuntimeCostModel>(
      parts->planner->cost_model(out.system, input, {}, what_if));
  out.cost_source = "the runtime's cost model (what dype-serve plans with): " + source + " (modelled)";
  out.runtime = std::move(parts);
  return out;
}

}  // namespace dype::rt
