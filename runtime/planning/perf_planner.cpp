#include "runtime/planning/perf_planner.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "common/error.h"

namespace dype::rt {

namespace {

const kernels::OpKind kOps[] = {kernels::OpKind::spmm, kernels::OpKind::gemm, kernels::OpKind::window_attention,
                                kernels::OpKind::softmax, kernels::OpKind::layer_norm};

std::string fmt_s(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", s * 1e3);
  return std::string(b) + " ms";
}

// Where a refined prediction for one shape comes from, for the re-check's cause.
std::string history_note(const perf::Refinement& r, std::uint64_t key) {
  const perf::ShapeHistory* h = r.history_of(key);
  const int n = h ? h->count : 0;
  if (n >= perf::ShapeHistory::kMinSamples) return "this shape's median of its last " + std::to_string(n) + " launches";
  return "size correction, " + std::to_string(n) + " launches of this shape kept";
}

}  // namespace

std::string device_profile_id(const hw::System& system, const hw::Device& device) {
  if (const hw::DeviceProfile* profile = device.device_profile()) return profile->id;
  const hw::DeviceConfig* cfg = system.config().find(device.name());
  return cfg && cfg->profile ? cfg->profile->id : std::string();
}

PerfModelPlanner::PerfModelPlanner(const Model& model, const hw::System& system, std::vector<perf::ModelStore> stores,
                                   PerfPlannerOptions options, sched::SolverKind solver)
    : SchedPlanner(model, system, solver), sys_(system), options_(options) {
  for (auto& s : stores) {
    const std::string id = s.device_model;
    if (id.empty()) throw InputError("perf model store", "has no device_model");
    if (!stores_.emplace(id, std::move(s)).second)
      throw InputError("perf model store " + id, "given twice for the same device model");
  }
  planned_ = stores_;
  // Which kernels of which device model come from where, for every plan's record.
  std::map<std::string, std::pair<std::string, std::string>> by_model;  // id -> (fitted, device model)
  for (const hw::Device* d : system.devices()) {
    const std::string id = device_profile_id(system, *d);
    if (id.empty() || by_model.count(id)) continue;
    auto& [fitted, own] = by_model[id];
    const auto it = stores_.find(id);
    for (kernels::OpKind op : kOps) {
      if (!d->supports(op)) continue;
      std::string& into = it != stores_.end() && it->second.find(op) ? fitted : own;
      into += (into.empty() ? "" : ",") + std::string(kernels::to_string(op));
    }
  }
  for (const auto& [id, srcs] : by_model) {
    if (!cost_source_.empty()) cost_source_ += "; ";
    cost_source_ += id + ": ";
    if (!srcs.first.empty()) cost_source_ += "fitted perf model (" + srcs.first + ")";
    if (!srcs.first.empty() && !srcs.second.empty()) cost_source_ += ", ";
    if (!srcs.second.empty()) cost_source_ += "device model (" + srcs.second + ")";
  }
  set_kernel_time([this](const hw::Device& d, const kernels::OpShape& shape) { return kernel_time_s(d, shape); });
}

std::vector<perf::ModelStore> PerfModelPlanner::load_stores(const std::vector<std::string>& files) {
  std::vector<perf::ModelStore> out;
  for (const auto& f : files) out.push_back(perf::ModelStore::load(f));
  return out;
}

double PerfModelPlanner::kernel_time_s(const hw::Device& device, const kernels::OpShape& shape) const {
  if (!device.supports(shape.kind)) return sched::kInf;
  const std::string id = device_profile_id(sys_, device);
  {
    std::lock_guard lock(mu_);
    const auto it = stores_.find(id);
    if (it != stores_.end()) {
      if (const perf::KernelModel* km = it->second.find(shape.kind)) {
        const double t = km->predict(shape).seconds;
        if (std::isfinite(t) && t >= 0) return t;
      }
    }
  }
  return modelled_kernel_time_s(sys_, device, shape);
}

PlannedPipeline PerfModelPlanner::plan(const Characteristics& c, const std::string& mode,
                                       const std::set<std::string>& excluded) {
  {
    // The models this plan is made with: later refinements are measured against them.
    std::lock_guard lock(mu_);
    planned_ = stores_;
    recheck_.reset();
    moved_run_.clear();
  }
  PlannedPipeline p = SchedPlanner::plan(c, mode, excluded);
  p.cost_source = cost_source_;
  return p;
}

std::optional<std::string> PerfModelPlanner::take_recheck() {
  std::lock_guard lock(mu_);
  auto r = std::move(recheck_);
  recheck_.reset();
  return r;
}

void PerfModelPlanner::on_stage(const StageEvent& e) {
  if (!options_.refine_online || e.failed) return;
  for (const KernelTiming& t : e.kernels) {
    if (!(t.seconds > 0) || !std::isfinite(t.seconds)) continue;
    const hw::Device* d = sys_.find(t.device);
    if (!d) continue;
    const std::string id = device_profile_id(sys_, *d);
    std::lock_guard lock(mu_);
    const auto it = stores_.find(id);
    if (it == stores_.end()) continue;
    perf::KernelModel* km = it->second.find(t.shape.kind);
    if (!km) continue;
    const perf::RefineOutcome o = km->refine(t.shape, t.seconds, options_.refine);
    // A launch the RLS gate rejects still enters its shape's history (the median guards that), so
    // the launched shape's prediction is checked either way.
    if (o == perf::RefineOutcome::rejected_outlier) counters_.rejected++;
    else counters_.accepted++;
    if (recheck_) continue;
    const auto pit = planned_.find(id);
    const perf::KernelModel* before = pit != planned_.end() ? pit->second.find(t.shape.kind) : nullptr;
    if (!before) continue;
    const double now_s = km->predict(t.shape).seconds, then_s = before->predict(t.shape).seconds;
    int& run = moved_run_[{id, t.shape.kind}];
    run = (then_s > 0 && std::fabs(now_s / then_s - 1.0) > options_.recheck_threshold) ? run + 1 : 0;
    if (run >= std::max(1, options_.recheck_sustain)) {
      run = 0;
      recheck_ = id + " " + std::string(kernels::to_string(t.shape.kind)) + " model refined from " +
                 (t.modelled ? "modelled device" : "measured") + " kernel times on " + t.device + ": now " +
                 fmt_s(now_s) + " where the plan assumed " + fmt_s(then_s) + " (m=" + std::to_string(t.shape.m) +
                 " k=" + std::to_string(t.shape.k) + " n=" + std::to_string(t.shape.n) + ", last launch " +
                 fmt_s(t.seconds) + ", " + history_note(km->refinement, perf::shape_key(t.shape)) + ")";
      counters_.rechecks++;
    }
  }
}

std::vector<perf::ModelStore> PerfModelPlanner::stores() const {
  std::lock_guard lock(mu_);
  std::vector<perf::ModelStore> out;
  for (const auto& [id, s] : stores_) out.push_back(s);
  return out;
}

PerfModelPlanner::Counters PerfModelPlanner::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}


std::vector<perf::ModelStore> PerfModelPlanner::stores_for(const hw::System& system, const std::string& perfmodels_dir) {
  std::vector<perf::ModelStore> stores;
  if (perfmodels_dir.empty()) return stores;
  const std::filesystem::path dir(perfmodels_dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw InputError("perfmodels " + dir.string(), "not a directory");
  std::set<std::string> seen;
  for (const hw::Device* d : system.devices()) {
    const std::string id = device_profile_id(system, *d);
    if (id.empty() || !seen.insert(id).second) continue;
    const std::filesystem::path file = dir / (id + ".json");
    if (std::filesystem::exists(file, ec)) stores.push_back(perf::ModelStore::load(file, id));
  }
  return stores;
}

}  // namespace dype::rt
