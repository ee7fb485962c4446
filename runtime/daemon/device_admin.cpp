#include "runtime/daemon/device_admin.h"

#include "hw/device_profile.h"
#include "hw/event.h"
#include "runtime/perf_planner.h"
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

std::set<std::string> DeviceAdmin::mismatched_fpgas(const std::string& device, const std::string& image) const {
  std::set<std::string> out;
  const auto fpgas = system_.devices_of(hw::DeviceKind::fpga);
  auto image_now = [&](const hw::Device* d) -> std::optional<std::string> {
    if (!device.empty() && d->name() == device) return image;
    if (d->reconfigurable()) return image_of(*d);
    return std::nullopt;  // not reconfigurable: no image to compare
  };
  if (fpgas.empty()) return out;
  const auto ref = image_now(fpgas.front());
  if (!ref) return out;
  for (const hw::Device* d : fpgas) {
    const auto im = image_now(d);
    if (im && *im != *ref) out.insert(d->name());
  }
  return out;
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
  std::set<std::string> left_out = operator_drained_;
  for (const std::string& d : mismatched_fpgas()) left_out.insert(d);
  for (const std::string& d : left_out) {
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
  std::lock_guard lock(mu_);
  if (!system_.find(device)) throw NotFound("unknown device '" + device + "'");
  const Snapshot before = snapshot();
  const std::set<std::string> was = operator_drained_;
  if (drained) operator_drained_.insert(device);
  else operator_drained_.erase(device);
  const std::string detail = std::string("operator ") + (drained ? "drained " : "undrained ") + device;
  try {
    std::set<std::string> out = operator_drained_;
    for (const std::string& d : mismatched_fpgas()) out.insert(d);
    apply_left_out(out, drained ? "drain" : "undrain", detail);
  } catch (const std::exception& e) {
    operator_drained_ = was;
    restore(before, "rollback: " + detail + " failed");
    throw RolledBack(std::string(drained ? "draining " : "undraining ") + device + " failed: " + e.what() +
                     "; the previous plans are restored");
  }
  const auto held = mismatched_fpgas();
  return {{"device", device}, {"drained", operator_drained_.count(device) > 0}, {"held_out", held.count(device) > 0},
          {"plans", plan_labels()}};
}

json DeviceAdmin::load_bitstream(const std::string& device, const std::string& manifest_path) {
  std::lock_guard lock(mu_);
  hw::Device& fpga = reconfigurable_fpga(device);
  const hw::Bitstream bs = hw::load_bitstream(manifest_path);  // InputError names the file and key
  const std::string board = device_profile_id(system_, fpga);  // "" when the system names no profile
  if (!board.empty() && bs.profile_id != board)
    throw InputError("path", "bitstream '" + bs.name + "' is built for '" + bs.profile_id + "', " + device +
                                 " is a '" + board + "'");
  const std::optional<hw::Bitstream> previous =
      fpga.bitstream() ? std::optional<hw::Bitstream>(*fpga.bitstream()) : std::nullopt;
  const std::string prev_name = image_of(fpga);
  const Snapshot before = snapshot();
  const std::set<std::string> was_drained = operator_drained_;
  const std::string detail = device + ": bitstream " + prev_name + " -> " + bs.name;
  const double t0 = hw::now_s();
  double load_s = 0.0;
  hw::TimeSource load_source = fpga.info().time_source;
  try {
    // Out of every plan first, with the FPGAs that do not match the kind's first one before or
    // after the swap (the planner times the kind on the first FPGA even while it is drained).
    std::set<std::string> out = operator_drained_;
    out.insert(device);
    for (const std::string& d : mismatched_fpgas(device, bs.name)) out.insert(d);
    for (const std::string& d : mismatched_fpgas()) out.insert(d);
    apply_left_out(out, "bitstream", detail + " (draining " + device + ")");
    const hw::Event ev = fpga.load_bitstream(bs);  // the modelled reconfiguration time passes here
    load_s = ev.end_s - ev.start_s;
    load_source = ev.source;
    operator_drained_.erase(device);  // a loaded image puts an unloaded or drained FPGA back in service
    std::set<std::string> back = operator_drained_;
    for (const std::string& d : mismatched_fpgas()) back.insert(d);
    apply_left_out(back, "bitstream", detail);
  } catch (const std::exception& e) {
    operator_drained_ = was_drained;
    std::string undo;
    if (image_of(fpga) != prev_name) {
      try {
        if (previous) fpga.load_bitstream(*previous);
        else fpga.unload_bitstream();
      } catch (const std::exception& e2) {
        undo = std::string("; reloading ") + prev_name + " failed too (" + e2.what() + "), " + device +
               " stays drained";
        operator_drained_.insert(device);
      }
    }
    if (undo.empty()) {
      restore(before, "rollback: " + detail + " failed");
    } else {
      try {
        std::set<std::string> out = operator_drained_;
        for (const std::string& d : mismatched_fpgas()) out.insert(d);
        apply_left_out(out, "rollback", detail + " failed");
      } catch (const std::exception&) {
      }
    }
    throw RolledBack("loading bitstream '" + bs.name + "' onto " + device + " failed: " + e.what() +
                     "; rolled back to bitstream " + prev_name + " and the previous plans" + undo);
  }
  json kernels = json::array();
  for (const hw::BitstreamKernel& k : bs.kernels) kernels.push_back({{"op", std::string(kernels::to_string(k.op))}, {"design", k.design}});
  return {{"device", device},         {"bitstream", bs.name},
          {"previous", prev_name},    {"file", bs.file},
          {"kernels", kernels},       {"load_time_s", load_s},
          {"load_time_source", source_of(load_source)}, {"swap_s", hw::now_s() - t0},
          {"swap_source", "measured"}, {"held_out", mismatched_fpgas()},
          {"plans", plan_labels()}};
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
    std::set<std::string> out = operator_drained_;
    for (const std::string& d : mismatched_fpgas(device, "none")) out.insert(d);
    for (const std::string& d : mismatched_fpgas()) out.insert(d);
    apply_left_out(out, "bitstream", detail);
    fpga.unload_bitstream();
  } catch (const std::exception& e) {
    operator_drained_ = was_drained;
    restore(before, "rollback: " + detail + " failed");
    throw RolledBack("unloading " + device + " failed: " + e.what() + "; the previous plans are restored");
  }
  return {{"device", device}, {"previous", prev_name}, {"bitstream", "none"}, {"drained", true},
          {"held_out", mismatched_fpgas()}, {"plans", plan_labels()}};
}

json DeviceAdmin::devices() const {
  std::set<std::string> drained;
  {
    // operator_drained_ changes only under mu_, which the caller (AdminApi) serialises with.
    drained = operator_drained_;
  }
  const auto held = mismatched_fpgas();
  json out = json::array();
  for (const hw::Device* d : system_.devices()) {
    json j = {{"name", d->name()}, {"kind", std::string(hw::to_string(d->kind()))}, {"drained", drained.count(d->name()) > 0},
              {"held_out", held.count(d->name()) > 0}};
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

void DeviceAdmin::hold_out_mismatched_fpgas() {
  const auto held = mismatched_fpgas();
  if (!held.empty()) apply_left_out(held, "bitstream", "FPGAs whose bitstream differs from the first FPGA's");
}

}  // namespace dype::rt::daemon
