#pragma once
// Where the other hosts of a multi-host system (hw::SystemConfig::hosts) are now: each host's stage
// server address, from the system file or from the host's own join (dype-serve --join), and when
// it last said it was there. Shared by the coordinator's stage links (runtime/remote/), its
// heartbeat watch and the admin API; every call is thread-safe.
//
//   HostDirectory hosts(system.config());
//   hosts.join("b", "10.0.0.7:7102", now);       // its worker reported in
//   std::optional<std::string> a = hosts.address("b");
//   for (const auto& h : hosts.silent_since(now - 10.0)) ...   // joined, then quiet for 10 s
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hw/system_config.h"

namespace dype::rt {

class HostDirectory {
 public:
  struct Host {
    std::string name;
    std::string address;     // "" while a host listed without one has not joined
    bool joined = false;     // its worker reported in (dype-serve --join); else the file's address
    double last_seen_s = 0;  // steady clock (hw::now_s) of its latest join or heartbeat
    std::uint64_t joins = 0;
  };

  explicit HostDirectory(const hw::SystemConfig& system);

  // The other hosts (hosts[1..]), in the file's order.
  std::vector<Host> hosts() const;
  bool known(const std::string& host) const;
  // Whether its worker has reported in (dype-serve --join).
  bool joined(const std::string& host) const;
  // The stage server's address; nullopt while the host has not joined (and its file gave none).
  std::optional<std::string> address(const std::string& host) const;
  // A join or heartbeat: records the address and the time. Returns true when the address changed
  // or the host had not joined before (its devices should be planned again).
  bool join(const std::string& host, const std::string& address, double now_s);
  // Hosts that joined and have not been heard from since `before_s`.
  std::vector<std::string> silent_since(double before_s) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> order_;
  std::map<std::string, Host> hosts_;
};

}  // namespace dype::rt
