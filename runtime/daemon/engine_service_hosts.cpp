// EngineService's other hosts (engine_service.h): joins and heartbeats, heartbeat timeouts, the
// admin API's host list and host drains.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "hw/event.h"
#include "common/error.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {

namespace {

std::string report_field(const nlohmann::json& d, const char* key, std::size_t i) {
  if (!d.contains(key)) return "";
  if (!d[key].is_string()) throw InputError("devices[" + std::to_string(i) + "]." + key, "must be a string");
  return d[key].get<std::string>();
}

}  // namespace

nlohmann::json EngineService::join_host(const std::string& host, const std::string& address,
                                        const nlohmann::json& devices) {
  const hw::SystemConfig& cfg = system_->config();
  if (!hosts_->known(host)) throw InputError("host", "no host named '" + host + "' among this system's other hosts");
  if (!hw::is_host_port(address) || address.size() > 255)
    throw InputError("address", "must be HOST:PORT, got '" + address.substr(0, 64) + "'");
  if (!devices.is_array()) throw InputError("devices", "must be a list of the worker's devices");
  if (devices.size() > 1024) throw InputError("devices", "more than 1024 devices");
  std::map<std::string, std::size_t> reported;  // name -> its index in `devices`
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    if (!d.is_object()) throw InputError("devices[" + std::to_string(i) + "]", "must be an object");
    const std::string name = report_field(d, "name", i);
    if (name.empty()) throw InputError("devices[" + std::to_string(i) + "].name", "missing");
    reported[name] = i;
  }
  // The devices this system plans on `host` must be there, as planned.
  const std::vector<std::string> planned = cfg.devices_on(host);
  for (const std::string& name : planned) {
    const hw::DeviceConfig* dc = cfg.find(name);
    const auto it = reported.find(name);
    const std::string where = "devices '" + name + "'";
    if (it == reported.end())
      throw InputError(where, "this system plans it on host '" + host + "' but the worker does not have it");
    const nlohmann::json& r = devices[it->second];
    const std::string kind = report_field(r, "kind", it->second), model = report_field(r, "model", it->second),
                      product = report_field(r, "product", it->second), image = report_field(r, "bitstream", it->second);
    if (kind != hw::to_string(dc->kind))
      throw InputError(where + ".kind", "the worker's is '" + kind + "', this system plans a " + std::string(hw::to_string(dc->kind)));
    // Its device model (what this system plans it with), when the worker's device has one.
    if (dc->profile && !model.empty() && model != dc->profile->id)
      throw InputError(where + ".model", "the worker's is '" + model + "' (" + product + "), this system plans '" +
                                             dc->profile->id + "'");
    if (dc->bitstream && image != dc->bitstream->name)
      throw InputError(where + ".bitstream", "the worker's image is '" + image + "', this system plans '" + dc->bitstream->name + "'");
  }
  std::vector<std::string> extra;
  for (const auto& [name, i] : reported)
    if (std::find(planned.begin(), planned.end(), name) == planned.end()) extra.push_back(name);
  const bool news = hosts_->join(host, address, hw::now_s());
  const int replanned = restore_host(host);
  if (news || replanned > 0)
    spdlog::info("host {} joined from {}: {} devices planned here{} ({} models re-planned)", host, address,
                 planned.size(), extra.empty() ? "" : ", " + std::to_string(extra.size()) + " not in this system", replanned);
  return {{"host", host}, {"address", address}, {"devices", planned}, {"not_planned", extra}, {"replanned", replanned}};
}

int EngineService::on_every_engine(const std::function<bool(Served&)>& change) {
  std::vector<std::shared_ptr<Served>> all;
  {
    std::shared_lock lock(served_mu_);
    all = served_;
  }
  int changed = 0;
  for (auto& s : all) changed += change(*s) ? 1 : 0;
  return changed;
}

std::vector<std::string> EngineService::hosts_with_failed_devices() const {
  std::set<std::string> hosts;
  std::shared_lock lock(served_mu_);
  for (const auto& s : served_)
    for (const std::string& d : s->engine->stats().failed_devices)
      if (std::string h = system_->config().remote_host(d); !h.empty()) hosts.insert(std::move(h));
  return {hosts.begin(), hosts.end()};
}

int EngineService::restore_host(const std::string& host) {
  const std::vector<std::string> devices = system_->config().devices_on(host);
  return on_every_engine([&](Served& s) {
    try {
      return s.engine->restore_devices(devices, "host " + host + " answers again");
    } catch (const std::exception& e) {
      spdlog::warn("model {}: host {} answers again, but no plan with it: {}", s.name, host, e.what());
      return false;
    }
  });
}

int EngineService::fail_host(const std::string& host, const std::string& why) {
  const std::vector<std::string> devices = system_->config().devices_on(host);
  return on_every_engine([&](Served& s) {
    try {
      return s.engine->fail_devices(devices, "host " + host + ": " + why);
    } catch (const std::exception& e) {
      spdlog::error("model {}: host {} lost ({}), and no plan is left without it: {}", s.name, host, why, e.what());
      return false;
    }
  });
}

nlohmann::json EngineService::hosts() const {
  const hw::SystemConfig& cfg = system_->config();
  std::set<std::string> failed, drained;
  {
    std::shared_lock lock(served_mu_);
    for (const auto& s : served_) {
      for (const std::string& d : s->engine->stats().failed_devices) failed.insert(d);
      for (const std::string& d : s->engine->drained_devices()) drained.insert(d);
    }
  }
  const double now = hw::now_s();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : hosts_->hosts()) {
    const hw::HostConfig* hc = cfg.find_host(h.name);
    const std::vector<std::string> devs = cfg.devices_on(h.name);
    nlohmann::json j = {{"name", h.name},
                        {"address", h.address.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.address)},
                        {"joined", h.joined},
                        {"devices", devs},
                        {"failed", std::any_of(devs.begin(), devs.end(), [&](const auto& d) { return failed.count(d) > 0; })},
                        {"drained", !devs.empty() && std::all_of(devs.begin(), devs.end(), [&](const auto& d) { return drained.count(d) > 0; })},
                        {"nic_gbit_per_s", hc ? hc->nic_bytes_per_s * 8 / 1e9 : 0.0},
                        {"nic_latency_us", hc ? hc->nic_latency_s * 1e6 : 0.0}};
    if (h.joined) j["last_heard_s_ago"] = now - h.last_seen_s;
    out.push_back(std::move(j));
  }
  return {{"coordinator", cfg.hosts.empty() ? "" : cfg.hosts.front().name}, {"hosts", out}};
}

std::vector<std::string> EngineService::host_devices(const std::string& host) const {
  if (!hosts_->known(host)) throw NotFound("host '" + host + "' is not one of this system's other hosts");
  return system_->config().devices_on(host);
}

}  // namespace dype::rt::daemon
