#include "runtime/planning/image_planner.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "runtime/planning/planning_kinds.h"

namespace dype::rt {

namespace {

std::vector<hw::Device*> usable_fpgas(const hw::System& system, const std::set<std::string>& excluded) {
  std::vector<hw::Device*> out;
  for (hw::Device* d : system.devices_of(hw::DeviceKind::fpga))
    if (d->reconfigurable() && usable(system, d, excluded)) out.push_back(d);
  return out;
}

std::string board_of(const hw::System& system, const hw::Device& d) {
  const hw::DeviceConfig* cfg = system.config().find(d.name());
  return cfg && cfg->profile ? cfg->profile->id : "";
}

}  // namespace

FpgaImages candidate_images(const hw::System& system, const std::set<std::string>& excluded) {
  FpgaImages out;
  std::set<std::string> folders;
  for (const hw::DeviceConfig& d : system.config().devices)
    if (d.kind == hw::DeviceKind::fpga && !d.bitstream_file.empty())
      folders.insert(std::filesystem::path(d.bitstream_file).parent_path().string());
  for (const hw::Device* d : usable_fpgas(system, excluded)) {
    const std::string board = board_of(system, *d);
    if (out.devices > 0 && board != out.board) return {};  // mixed boards: not handled here
    out.board = board;
    ++out.devices;
    const hw::Bitstream* b = d->bitstream();
    if (!b) continue;
    if (!b->file.empty()) folders.insert(std::filesystem::path(b->file).parent_path().string());
    auto it = std::find_if(out.options.begin(), out.options.end(),
                           [&](const ImageOption& o) { return o.bitstream.name == b->name; });
    if (it == out.options.end()) out.options.push_back({*b, 1});
    else ++it->loaded;
  }
  if (out.options.empty() || out.board.empty()) return {};
  add_manifests_in(folders, out);
  return out;
}

FpgaImagePlan assign_images(const hw::System& system, const std::set<std::string>& excluded,
                            const FpgaImages& images, const ImageAssignment& a) {
  FpgaImagePlan out;
  std::vector<int> left = a;
  std::vector<hw::Device*> rest;
  for (hw::Device* d : usable_fpgas(system, excluded)) {
    const std::string now = d->bitstream() ? d->bitstream()->name : "";
    bool kept = false;
    for (std::size_t i = 0; i < images.options.size() && !kept; ++i) {
      if (images.options[i].bitstream.name == now && left[i] > 0) {
        --left[i];
        out[d->name()] = &images.options[i].bitstream;
        kept = true;
      }
    }
    if (!kept) rest.push_back(d);
  }
  std::size_t i = 0;
  for (hw::Device* d : rest) {
    while (i < left.size() && left[i] == 0) ++i;
    if (i == left.size()) throw Error("image assignment gives images to fewer FPGAs than there are");
    --left[i];
    out[d->name()] = &images.options[i].bitstream;
  }
  return out;
}

ImagePlan plan_images(const SchedPlanner& planner, const Characteristics& c, const std::string& mode,
                      const std::set<std::string>& excluded, const FpgaImages& images, double horizon) {
  if (images.options.empty()) throw Error("image choice: no reconfigurable FPGA with an image to choose for");
  const hw::System& system = planner.system();
  const std::vector<ImageAssignment> assignments = image_assignments(images);
  std::vector<FpgaImagePlan> maps;
  for (const ImageAssignment& a : assignments) maps.push_back(assign_images(system, excluded, images, a));

  sched::ObjectiveSpec obj;
  obj.objective = sched::objective_from_string(mode);
  if (obj.objective == sched::Objective::balanced) {
    // Balanced holds every assignment to the fastest period over all of them, as dype-schedule.
    double fastest = sched::kInf;
    for (const FpgaImagePlan& m : maps) {
      try {
        fastest = std::min(fastest, planner.solve(c, {.objective = sched::Objective::perf}, excluded, &m).period_s);
      } catch (const sched::InfeasibleError&) {
      }
    }
    obj = {.objective = sched::Objective::qos, .balance_ratio = obj.balance_ratio,
           .min_throughput_per_s = obj.balance_ratio / fastest};
  }
  const std::vector<hw::Device*> fpgas = usable_fpgas(system, excluded);
  const double p_exec = fpgas.empty() ? 0.0 : fpgas.front()->info().power.execute_w;
  const ImageChoice choice = choose_images(
      images, assignments, [&](std::size_t i) { return planner.solve(c, obj, excluded, &maps[i]); }, horizon, p_exec,
      sched::objective_from_string(mode));

  ImagePlan out;
  out.assignment = assignments[choice.index];
  out.images = describe(images, out.assignment);
  out.by_device = maps[choice.index];
  for (const hw::Device* d : fpgas) {
    const hw::Bitstream* want = out.by_device.at(d->name());
    if (!d->bitstream() || d->bitstream()->name != want->name) out.reloads.emplace_back(d->name(), want);
  }
  out.cost = choice.cost;
  out.score = choice.score;
  out.plan = choice.plan;
  out.plan.objective = mode;
  out.planned.spec = to_pipeline_spec(choice.plan, system, excluded, &out.by_device);
  out.planned.mnemonic = choice.plan.mnemonic;
  out.planned.period_s = choice.plan.period_s;
  out.planned.energy_j = choice.plan.energy_j;
  out.planned.score = choice.plan.score;
  out.planned.cost_source = "device models and image manifests (modelled)";
  return out;
}

}  // namespace dype::rt
