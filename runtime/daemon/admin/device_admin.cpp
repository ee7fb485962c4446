#include "runtime/daemon/admin/device_admin.h"

#include <cmath>

#include "hw/device_profile.h"
#include "hw/event.h"
#include "runtime/planning/image_planner.h"
#include "runtime/planning/perf_planner.h"
#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {

using json = nlohmann::json;

namespace {
std::string image_of(const hw::Device& d) { return d.bitstream() ? d.bitstream()->name : "none"; }
const char* source_of(hw::TimeSource s) { return s == hw::TimeSource::modelled ? "modelled" : "measured"; }
}  // namespace

hw::Device& DeviceAdmin::reconfigurable_fpga(const std::string& device) const {
  hw::Device* d = system_.find(device);
  if (!d) throw NotFound("unknown device '" + device + "'");
  if (!d->reconfigurable())
    throw InputError("device", "'" + device + "' is not a reconfigurable FPGA (bitstreams load onto emulated and XRT FPGAs)");
  return *d;
}

void DeviceAdmin::apply_left_out(const std::set<std::string>& left_out, const std::string& cause,
                                   const std::string& detail) {
  for (const ServedEngine& s : engines_) {
    const std::set<std::string> now = s.engine->drained_devices();
    for (const std::string& d : left_out)
      if (!now.count(d) && !s.engine->drain_device(d, cause, detail, 60.0))
        throw Error("model " + s.name + ": requests still running on " + d + " after 60 s");
    for (const std::string& d : now)
      if (!left_out.count(d)) s.engine->undrain_device(d, cause, detail);
  }
}

void DeviceAdmin::admit(Engine& engine, const std::string& model) {
  std::lock_guard lock(mu_);
  for (const std::string& d : operator_drained_) {
    if (!engine.drain_device(d, "loaded", "left out as for every served model", 60.0))
      throw Error("model " + model + ": could not leave out " + d);
  }
}

void DeviceAdmin::set_engines(std::vector<ServedEngine> engines) {
  std::lock_guard lock(mu_);
  engines_ = std::move(engines);
}

DeviceAdmin::Snapshot DeviceAdmin::snapshot() const {
  Snapshot snap;
  for (const ServedEngine& s : engines_) {
    snap.specs.push_back(s.engine->current_spec());
    snap.labels.push_back(s.engine->current_label());
    snap.drained.push_back(s.engine->drained_devices());
  }
  return snap;
}

void DeviceAdmin::restore(const Snapshot& snap, const std::string& detail) {
  for (std::size_t i = 0; i < engines_.size() && i < snap.specs.size(); ++i) {
    Engine& e = *engines_[i].engine;
    if (e.drained_devices() == snap.drained[i] && describe(e.current_spec()) == describe(snap.specs[i])) continue;
    e.restore(snap.specs[i], snap.labels[i], snap.drained[i], detail);
  }
}

json DeviceAdmin::plan_labels() const {
  json out = json::object();
  for (const ServedEngine& s : engines_) out[s.name] = s.engine->current_label();
  return out;
}

json DeviceAdmin::set_device_drained(const std::string& device, bool drained) {
  json j = set_devices_drained({device}, drained, device);
  return {{"device", device}, {"drained", drained}, {"plans", j["plans"]}};
}

json DeviceAdmin::set_devices_drained(const std::vector<std::string>& devices, bool drained, const std::string& what) {
  std::lock_guard lock(mu_);
  for (const std::string& device : devices)
    if (!system_.find(device)) throw NotFound("unknown device '" + device + "'");
  const Snapshot before = snapshot();
  const std::set<std::string> was = operator_drained_;
  for (const std::string& device : devices) {
    if (drained) operator_drained_.insert(device);
    else operator_drained_.erase(device);
  }
  const std::string detail = std::string("operator ") + (drained ? "drained " : "undrained ") + what;
  try {
    // All at once: no plan in between that still uses some of them.
    apply_left_out(operator_drained_, drained ? "drain" : "undrain", detail);
  } catch (const std::exception& e) {
    operator_drained_ = was;
    restore(before, "rollback: " + detail + " failed");
    throw RolledBack(std::string(drained ? "draining " : "undraining ") + what + " failed: " + e.what() +
                     "; the previous plans are restored");
  }
  return {{"devices", devices}, {"drained", drained}, {"plans", plan_labels()}};
}

json DeviceAdmin::load_images(const std::vector<Load>& loads, const std::string& detail) {
  struct Before {
    std::optional<hw::Bitstream> image;
    std::string name;
  };
  std::vector<Before> before;
  for (const Load& l : loads)
    before.push_back({l.fpga->bitstream() ? std::optional<hw::Bitstream>(*l.fpga->bitstream()) : std::nullopt,
                      image_of(*l.fpga)});
  const Snapshot snap = snapshot();
  const std::set<std::string> was_drained = operator_drained_;
  json done = json::array();
  try {
    // Out of every plan first (requests already in a pipeline that uses them finish there).
    std::set<std::string> out = operator_drained_;
    for (const Load& l : loads) out.insert(l.fpga->name());
    apply_left_out(out, "bitstream", detail + " (draining)");
    for (const Load& l : loads) {
      const hw::Event ev = l.fpga->load_bitstream(l.image);  // the modelled reconfiguration time passes here
      done.push_back({{"device", l.fpga->name()}, {"bitstream", l.image.name}, {"file", l.image.file},
                      {"load_time_s", ev.end_s - ev.start_s}, {"load_time_source", source_of(ev.source)}});
      operator_drained_.erase(l.fpga->name());  // a loaded image puts an unloaded or drained FPGA back in service
    }
    apply_left_out(operator_drained_, "bitstream", detail);
  } catch (const std::exception& e) {
    operator_drained_ = was_drained;
    std::string undo;
    for (std::size_t i = 0; i < loads.size(); ++i) {
      hw::Device& fpga = *loads[i].fpga;
      if (image_of(fpga) == before[i].name) continue;
      try {
        if (before[i].image) fpga.load_bitstream(*before[i].image);
        else fpga.unload_bitstream();
      } catch (const std::exception& e2) {
        undo += std::string("; reloading ") + before[i].name + " onto " + fpga.name() + " failed too (" + e2.what() +
                "), " + fpga.name() + " stays drained";
        operator_drained_.insert(fpga.name());
      }
    }
    if (undo.empty()) {
      restore(snap, "rollback: " + detail + " failed");
    } else {
      try {
        apply_left_out(operator_drained_, "rollback", detail + " failed");
      } catch (const std::exception&) {
      }
    }
    std::string previous;
    for (std::size_t i = 0; i < loads.size(); ++i)
      previous += (previous.empty() ? "" : ", ") + loads[i].fpga->name() + " " + before[i].name;
    throw RolledBack(detail + " failed: " + e.what() + "; rolled back to bitstream" + (loads.size() > 1 ? "s " : " ") +
                     (loads.size() > 1 ? previous : before.front().name) + " and the previous plans" + undo);
  }
  return done;
}

json DeviceAdmin::load_bitstream(const std::string& device, const std::string& manifest_path) {
  std::lock_guard lock(mu_);
  hw::Device& fpga = reconfigurable_fpga(device);
  const hw::Bitstream bs = hw::load_bitstream(manifest_path);  // InputError names the file and key
  const std::string board = device_profile_id(system_, fpga);  // "" when the system names no profile
  if (!board.empty() && bs.profile_id != board)
    throw InputError("path", "bitstream '" + bs.name + "' is built for '" + bs.profile_id + "', " + device +
                                 " is a '" + board + "'");
  const std::string prev_name = image_of(fpga);
  const double t0 = hw::now_s();
  const json done = load_images({{&fpga, bs}}, "loading bitstream '" + bs.name + "' onto " + device);
  json kernels = json::array();
  for (const hw::BitstreamKernel& k : bs.kernels) kernels.push_back({{"op", std::string(kernels::to_string(k.op))}, {"design", k.design}});
  return {{"device", device},         {"bitstream", bs.name},
          {"previous", prev_name},    {"file", bs.file},
          {"kernels", kernels},       {"load_time_s", done[0]["load_time_s"]},
          {"load_time_source", done[0]["load_time_source"]}, {"swap_s", hw::now_s() - t0},
          {"swap_source", "measured"}, {"plans", plan_labels()}};
}

json DeviceAdmin::choose_images(const SchedPlanner& planner, const Engine::PlanningState& state, double horizon,
                                bool apply) {
  if (!(horizon >= 1) || !std::isfinite(horizon))
    throw InputError("horizon", "must be a finite number of requests >= 1, got " + std::to_string(horizon));
  std::lock_guard lock(mu_);
  const std::string& mode = state.mode;
  std::set<std::string> excluded = state.left_out;
  excluded.insert(operator_drained_.begin(), operator_drained_.end());
  const FpgaImages images = candidate_images(system_, excluded);
  if (images.options.empty())
    throw InputError("model", "no reconfigurable FPGA in service holds an image of one board to choose from");
  const ImagePlan ip = plan_images(planner, state.characteristics, mode, excluded, images, horizon);
  json options = json::array();
  for (const ImageOption& o : images.options)
    options.push_back({{"bitstream", o.bitstream.name}, {"file", o.bitstream.file}, {"loaded", o.loaded}});
  json reloads = json::array();
  for (const auto& [device, image] : ip.reloads) {
    const hw::Device* d = system_.find(device);
    reloads.push_back({{"device", device}, {"previous", image_of(*d)}, {"bitstream", image->name}, {"file", image->file}});
  }
  json out = {{"images", ip.images},
              {"candidates", options},
              {"reloads", reloads},
              {"pause_s", ip.cost.pause_s},
              {"horizon", horizon},
              {"mode", mode},
              {"predicted", {{"plan", ip.plan.mnemonic}, {"period_s", ip.plan.period_s}, {"energy_j", ip.plan.energy_j},
                             {"amortised_score", ip.score}}},
              {"source", "modelled"},
              {"applied", false}};
  if (!apply || ip.reloads.empty()) {
    out["plans"] = plan_labels();
    return out;
  }
  std::vector<Load> loads;
  for (const auto& [device, image] : ip.reloads) loads.push_back({system_.find(device), *image});
  const double t0 = hw::now_s();
  out["loads"] = load_images(loads, "image choice (" + ip.images + ")");
  out["applied"] = true;
  out["swap_s"] = hw::now_s() - t0;
  out["swap_source"] = "measured";
  out["plans"] = plan_labels();
  return out;
}

json DeviceAdmin::unload_bitstream(const std::string& device) {
  std::lock_guard lock(mu_);
  hw::Device& fpga = reconfigurable_fpga(device);
  const std::optional<hw::Bitstream> previous =
      fpga.bitstream() ? std::optional<hw::Bitstream>(*fpga.bitstream()) : std::nullopt;
  const std::string prev_name = image_of(fpga);
  const Snapshot before = snapshot();
  const std::set<std::string> was_drained = operator_drained_;
  const std::string detail = device + ": bitstream " + prev_name + " unloaded";
  try {
    operator_drained_.insert(device);  // an FPGA without an image runs nothing: keep it out
    apply_left_out(operator_drained_, "bitstream", detail);
    fpga.unload_bitstream();
  } catch (const std::exception& e) {
    operator_drained_ = was_drained;
    restore(before, "rollback: " + detail + " failed");
    throw RolledBack("unloading " + device + " failed: " + e.what() + "; the previous plans are restored");
  }
  return {{"device", device}, {"previous", prev_name}, {"bitstream", "none"}, {"drained", true},
          {"plans", plan_labels()}};
}

json DeviceAdmin::devices() const {
  std::set<std::string> drained;
  {
    // operator_drained_ changes only under mu_, which the caller (AdminApi) serialises with.
    drained = operator_drained_;
  }
  std::set<std::string> failed;  // left out after a fault (a host that stopped answering, a device error)
  for (const ServedEngine& s : engines_)
    for (const std::string& d : s.engine->stats().failed_devices) failed.insert(d);
  json out = json::array();
  for (const hw::Device* d : system_.devices()) {
    json j = {{"name", d->name()}, {"kind", std::string(hw::to_string(d->kind()))},
              {"planned_as", planning_kind_name(system_, *d)}, {"drained", drained.count(d->name()) > 0},
              {"failed", failed.count(d->name()) > 0}};
    if (const std::string host = system_.config().remote_host(d->name()); !host.empty()) {
      j["host"] = host;  // runs on that host's stage server, where it is now (null: not joined yet)
      const std::optional<std::string> a = hosts_ ? hosts_->address(host) : std::nullopt;
      j["address"] = a ? json(*a) : json(nullptr);
    }
    j["backend"] = d->info().backend;
    if (d->reconfigurable()) j["bitstream"] = image_of(*d);
    if (const auto e = d->energy()) {
      j["energy_j"] = e->total_j();
      j["energy_source"] = source_of(d->info().time_source);
    }
    out.push_back(j);
  }
  return {{"devices", out}};
}

}  // namespace dype::rt::daemon
