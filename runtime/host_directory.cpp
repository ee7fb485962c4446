#include "runtime/host_directory.h"

#include "common/error.h"

namespace dype::rt {

HostDirectory::HostDirectory(const hw::SystemConfig& system) {
  for (std::size_t i = 1; i < system.hosts.size(); ++i) {
    const auto& h = system.hosts[i];
    order_.push_back(h.name);
    hosts_[h.name] = Host{.name = h.name, .address = h.address};
  }
}

std::vector<HostDirectory::Host> HostDirectory::hosts() const {
  std::lock_guard lock(mu_);
  std::vector<Host> out;
  for (const auto& n : order_) out.push_back(hosts_.at(n));
  return out;
}

bool HostDirectory::known(const std::string& host) const {
  std::lock_guard lock(mu_);
  return hosts_.count(host) > 0;
}

bool HostDirectory::joined(const std::string& host) const {
  std::lock_guard lock(mu_);
  const auto it = hosts_.find(host);
  return it != hosts_.end() && it->second.joined;
}

std::optional<std::string> HostDirectory::address(const std::string& host) const {
  std::lock_guard lock(mu_);
  const auto it = hosts_.find(host);
  if (it == hosts_.end() || it->second.address.empty()) return std::nullopt;
  return it->second.address;
}

bool HostDirectory::join(const std::string& host, const std::string& address, double now_s) {
  std::lock_guard lock(mu_);
  const auto it = hosts_.find(host);
  if (it == hosts_.end()) throw InputError("host", "no host named '" + host + "' in the coordinator's system");
  Host& h = it->second;
  const bool news = !h.joined || h.address != address;
  h.address = address;
  h.joined = true;
  h.last_seen_s = now_s;
  ++h.joins;
  return news;
}

std::vector<std::string> HostDirectory::silent_since(double before_s) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& n : order_) {
    const Host& h = hosts_.at(n);
    if (h.joined && h.last_seen_s < before_s) out.push_back(n);
  }
  return out;
}

}  // namespace dype::rt
