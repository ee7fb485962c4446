#include "runtime/planning/startup_profile.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "common/error.h"
#include "perfmodel/profiler.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/planning_kinds.h"

namespace dype::rt {

namespace fs = std::filesystem;

std::string describe(const StoreOrigin& origin) {
  switch (origin.kind) {
    case StoreOrigin::Kind::fitted: return "fitted (" + origin.path + ")";
    case StoreOrigin::Kind::startup_measured:
      return origin.path.empty() ? "start-up measurement (not kept: no --state-dir)"
                                 : "start-up measurement (kept in " + origin.path + ")";
    case StoreOrigin::Kind::startup_reused: return "start-up measurement of an earlier start (" + origin.path + ")";
  }
  return "unknown";
}

namespace {

// Times each kernel the device runs in its share of the budget; a kernel that gets too few points
// is left out (a warning), the others are kept.
perf::ModelStore measure(hw::Device& device, const std::string& id, const StartupProfileOptions& options,
                         std::vector<std::string>& warnings) {
  std::vector<kernels::OpKind> kinds;
  for (kernels::OpKind k : {kernels::OpKind::spmm, kernels::OpKind::gemm, kernels::OpKind::window_attention})
    if (device.supports(k)) kinds.push_back(k);
  perf::ModelStore store;
  bool any = false;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    perf::ProfileOptions po;
    po.kernels = {kinds[i]};
    po.budget_s = options.budget_s / static_cast<double>(kinds.size());
    po.max_points = 400;
    try {
      perf::ModelStore one = perf::profile_device(device, id, po);
      if (!any) {
        store = std::move(one);
        any = true;
      } else {
        for (auto& [kind, model] : one.models) store.models.insert_or_assign(kind, std::move(model));
      }
      if (options.log) {
        const perf::FitStats& st = store.models.at(kinds[i]).stats;
        char line[160];
        std::snprintf(line, sizeof line, "%d points, held-out MAPE %.1f%%", st.samples, st.mape_holdout * 100);
        options.log(device.name() + " (" + id + "): " + std::string(kernels::to_string(kinds[i])) + " " + line);
      }
    } catch (const Error& e) {
      warnings.push_back(device.name() + " (" + id + "): start-up measurement of " +
                         std::string(kernels::to_string(kinds[i])) + " failed: " + e.what() +
                         "; that kernel is planned from the device profile");
    }
  }
  if (!any) throw Error(device.name() + ": no kernel could be measured");
  return store;
}

}  // namespace

PlanningStores load_planning_stores(const hw::System& system, const StartupProfileOptions& options) {
  PlanningStores out;
  std::error_code ec;
  if (!options.perfmodels_dir.empty() && !fs::is_directory(options.perfmodels_dir, ec))
    throw InputError("perfmodels " + options.perfmodels_dir, "not a directory");
  const fs::path kept_dir = options.state_dir.empty() ? fs::path() : fs::path(options.state_dir) / "perfmodels";
  std::set<std::string> seen;
  for (hw::Device* d : system.devices()) {
    const std::string id = device_profile_id(system, *d);
    if (id.empty() || !seen.insert(id).second) continue;
    const bool real = d->info().time_source == hw::TimeSource::measured && system.config().remote_host(d->name()).empty();
    if (!options.perfmodels_dir.empty()) {
      const fs::path file = fs::path(options.perfmodels_dir) / (id + ".json");
      if (fs::exists(file, ec)) {
        // A damaged store the operator put there is an error naming it (ModelStore::load throws).
        perf::ModelStore s = perf::ModelStore::load(file, id);
        if (real && s.provenance == "modelled") {
          out.warnings.push_back(file.string() + " was fitted on an emulated " + id + ", not used for the real " +
                                 d->name());
        } else {
          out.origin[id] = {StoreOrigin::Kind::fitted, file.string()};
          out.stores.push_back(std::move(s));
          continue;
        }
      }
    }
    if (!kept_dir.empty()) {
      const fs::path file = kept_dir / (id + ".json");
      if (fs::exists(file, ec)) {
        try {
          out.stores.push_back(perf::ModelStore::load(file, id));
          out.origin[id] = {StoreOrigin::Kind::startup_reused, file.string()};
          continue;
        } catch (const Error& e) {
          out.warnings.push_back(std::string("kept start-up measurement not used (measuring again): ") + e.what());
        }
      }
    }
    const bool wanted = (real || options.measure_modelled) && (d->kind() != hw::DeviceKind::cpu || options.measure_cpu) &&
                        !d->reconfigurable() && usable(system, d, {});
    if (!wanted || options.budget_s <= 0) continue;
    if (options.log)
      options.log(d->name() + " (" + id + "): no fitted performance models; timing SpMM, GEMM and attention shapes for " +
                  std::to_string(static_cast<int>(options.budget_s)) + " s (--startup-profile-secs)");
    try {
      perf::ModelStore s = measure(*d, id, options, out.warnings);
      std::string kept;
      if (!kept_dir.empty()) {
        fs::create_directories(kept_dir, ec);
        if (ec) throw InputError("state dir " + kept_dir.string(), "cannot be created: " + ec.message());
        kept = (kept_dir / (id + ".json")).string();
        s.save(kept);
      }
      out.origin[id] = {StoreOrigin::Kind::startup_measured, kept};
      out.stores.push_back(std::move(s));
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      out.warnings.push_back(d->name() + " (" + id + "): start-up measurement failed: " + e.what() +
                             "; planned from its device profile");
    }
  }
  return out;
}

}  // namespace dype::rt
