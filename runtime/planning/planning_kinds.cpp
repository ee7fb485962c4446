#include "runtime/planning/planning_kinds.h"

#include <algorithm>

#include "common/error.h"

namespace dype::rt {

namespace {

const hw::DeviceKind kKinds[] = {hw::DeviceKind::gpu, hw::DeviceKind::fpga, hw::DeviceKind::cpu};

bool schedulable(const hw::System& system, const hw::Device* d) {
  const hw::DeviceConfig* cfg = system.config().find(d->name());
  return !cfg || cfg->schedulable;
}

// Whether the schedulable reconfigurable FPGAs hold (or would hold) more than one image.
bool fpga_kind_split(const hw::System& system, const FpgaImagePlan* images) {
  std::set<std::string> seen;
  for (const hw::Device* d : system.devices_of(hw::DeviceKind::fpga))
    if (d->reconfigurable() && schedulable(system, d)) seen.insert(image_name(*d, images));
  return seen.size() > 1;
}

}  // namespace

bool usable(const hw::System& system, const hw::Device* d, const std::set<std::string>& excluded) {
  return !excluded.count(d->name()) && schedulable(system, d);
}

std::string image_name(const hw::Device& d, const FpgaImagePlan* images) {
  if (!d.reconfigurable()) return "";
  if (images) {
    const auto it = images->find(d.name());
    if (it != images->end()) return it->second ? it->second->name : "none";
  }
  return d.bitstream() ? d.bitstream()->name : "none";
}

std::string planning_kind_name(const hw::System& system, const hw::Device& d, const FpgaImagePlan* images) {
  std::string name(hw::to_string(d.kind()));
  if (d.kind() == hw::DeviceKind::fpga && d.reconfigurable() && fpga_kind_split(system, images))
    name += ":" + image_name(d, images);
  // Devices of another host are their own kind: a hand-off to them crosses the NICs.
  if (const std::string host = system.config().remote_host(d.name()); !host.empty()) name += "@" + host;
  return name;
}

hw::DeviceKind device_kind_of(const std::string& kind_name) {
  const std::string base = kind_name.substr(0, kind_name.find_first_of(":@"));
  if (auto k = hw::device_kind_from_string(base)) return *k;
  throw Error("plan names unknown device kind '" + kind_name + "'");
}

std::string host_of_kind(const std::string& kind_name) {
  const auto at = kind_name.find('@');
  return at == std::string::npos ? "" : kind_name.substr(at + 1);
}

std::vector<PlanningKind> planning_kinds(const hw::System& system, const std::set<std::string>& excluded,
                                         const FpgaImagePlan* images) {
  std::vector<PlanningKind> out;
  for (hw::DeviceKind kind : kKinds) {
    const std::size_t first = out.size();
    for (hw::Device* d : system.devices_of(kind)) {
      if (!usable(system, d, excluded)) continue;
      const std::string name = planning_kind_name(system, *d, images);
      auto it = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                             [&](const PlanningKind& k) { return k.name == name; });
      if (it == out.end()) {
        PlanningKind k;
        k.name = name;
        k.kind = kind;
        if (images && d->reconfigurable()) {
          const auto im = images->find(d->name());
          const std::string now = d->bitstream() ? d->bitstream()->name : "none";
          if (im != images->end() && im->second && im->second->name != now) {
            k.manifest = im->second;
            const hw::DeviceConfig* cfg = system.config().find(d->name());
            k.board = cfg && cfg->profile ? &*cfg->profile : nullptr;
          }
        }
        out.push_back(std::move(k));
        it = out.end() - 1;
      }
      it->devices.push_back(d);
    }
    // FPGA kinds by image name, so the order does not depend on which FPGA holds what.
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
              [](const PlanningKind& a, const PlanningKind& b) { return a.name < b.name; });
  }
  return out;
}

}  // namespace dype::rt
