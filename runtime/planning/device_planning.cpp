#include "runtime/planning/device_planning.h"

#include <cmath>

#include "hw/device_profile.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/planning/planner.h"
#include "runtime/planning/planning_kinds.h"

namespace dype::rt {

namespace {

using kernels::OpKind;

// A small shape of each kernel: enough to ask whether a device model can time it at all.
kernels::OpShape probe(OpKind kind) {
  kernels::OpShape s;
  s.kind = kind;
  s.m = 1024;
  s.k = kind == OpKind::spmm ? 1024 : 64;
  s.n = 64;
  s.nnz = 8192;
  s.degree_skew = 1.0;
  s.seq_len = 256;
  s.window = 16;
  s.heads = 4;
  s.head_dim = 16;
  return s;
}

}  // namespace

std::string DevicePlanning::summary() const {
  std::string line = device + ": " + (planned ? "planned" : "not planned (" + why_not + ")") + "; profile " + profile;
  if (!estimated.empty()) line += " [estimated: " + estimated + "]";
  if (!kernel_times.empty()) {
    // Ops grouped by source: "fitted (x.json): spmm, gemm; device model (...): softmax".
    std::map<std::string, std::string> by_source;
    for (const auto& [op, src] : kernel_times) by_source[src] += (by_source[src].empty() ? "" : ", ") + op;
    line += "; kernel times:";
    bool first = true;
    for (const auto& [src, ops] : by_source) {
      line += std::string(first ? " " : "; ") + ops + " from " + src;
      first = false;
    }
  }
  return line;
}

nlohmann::json DevicePlanning::to_json() const {
  nlohmann::json j = {{"planned", planned}, {"profile", profile}, {"kernel_times", kernel_times}};
  if (!why_not.empty()) j["why_not"] = why_not;
  if (!estimated.empty()) j["estimated"] = estimated;
  if (warning) j["warning"] = true;
  return j;
}

std::vector<DevicePlanning> describe_device_planning(const hw::System& system, const PlanningStores& stores) {
  std::vector<DevicePlanning> out;
  for (const hw::Device* d : system.devices()) {
    DevicePlanning p;
    p.device = d->name();
    const hw::DeviceConfig* cfg = system.config().find(d->name());
    const std::string id = device_profile_id(system, *d);
    const hw::DeviceProfile* profile = d->device_profile() ? d->device_profile() : (cfg && cfg->profile ? &*cfg->profile : nullptr);
    if (profile) {
      p.profile = profile->id + " (" + std::string(hw::to_string(profile->source)) +
                  (profile->source == hw::ProfileSource::file && !profile->file.empty() ? " " + profile->file : "") + ")";
      p.estimated = profile->estimated;
    } else {
      p.profile = "none";
    }
    const perf::ModelStore* store = nullptr;
    for (const perf::ModelStore& s : stores.stores)
      if (!id.empty() && s.device_model == id) store = &s;
    const auto origin = stores.origin.find(id);
    int timed = 0, untimed = 0;
    for (OpKind op : {OpKind::spmm, OpKind::gemm, OpKind::window_attention, OpKind::softmax, OpKind::layer_norm}) {
      if (!d->supports(op)) continue;
      std::string src;
      if (store && store->find(op) && origin != stores.origin.end()) {
        src = describe(origin->second);
      } else if (std::isfinite(modelled_kernel_time_s(system, *d, probe(op)))) {
        src = d->modelled_kernel_time_s(probe(op)) ? "device model (emulated " + id + ")"
                                                  : "device profile roofline (" + id + ")";
      } else {
        src = "none";
      }
      (src == "none" ? untimed : timed) += 1;
      p.kernel_times[std::string(kernels::to_string(op))] = src;
    }
    const bool schedulable = usable(system, d, {});
    if (!schedulable) {
      p.why_not = "schedulable: false in the system file";
    } else if (timed == 0) {
      p.why_not = "no kernel times: no device profile" +
                  (cfg && !cfg->no_profile_why.empty() ? " (" + cfg->no_profile_why + ")" : std::string()) +
                  " and no fitted store" + (id.empty() ? std::string() : " " + id + ".json");
      p.warning = true;
    } else if (untimed > 0) {
      p.warning = true;  // planned, but only for the kernels it can time
    }
    p.planned = schedulable && timed > 0;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace dype::rt
