#pragma once
// A worker host's side of joining a multi-host deployment (dype-serve --join): every `interval` it
// tells the coordinator, over gRPC (dype.admin.DypeAdmin/JoinHost, authorised by the stage token),
// its name, its stage server's address and its devices (kind, product, FPGA image). The first
// call is the join; the later ones are its heartbeat, which the coordinator watches (a host not
// heard from within its --host-timeout-secs is left out of plans) and which brings it back in
// after it was left out. A coordinator that is not up yet, or refuses, is tried again each
// interval; the outcome is logged when it changes.
//
//   HostJoiner join({.coordinator = "10.0.0.1:8001", .host = "b", .address = "10.0.0.7:7102",
//                    .token = token}, system.devices());
//   ... join.stop();
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "hw/device.h"

namespace dype::rt::daemon {

struct HostJoinOptions {
  std::string coordinator;  // its gRPC HOST:PORT
  std::string host;         // this host's name in the coordinator's system file
  std::string address;      // this host's stage server, as the coordinator reaches it
  std::string token;        // the deployment's stage token
  std::chrono::milliseconds interval{2000};
  // PEM roots to verify a coordinator that serves gRPC over TLS (dype-serve --tls-cert); empty:
  // plain gRPC.
  std::string tls_ca_pem = "";
};

class HostJoiner {
 public:
  HostJoiner(HostJoinOptions options, std::span<hw::Device* const> devices);
  ~HostJoiner();
  HostJoiner(const HostJoiner&) = delete;
  HostJoiner& operator=(const HostJoiner&) = delete;

  void stop();
  std::uint64_t accepted() const { return accepted_.load(); }  // joins the coordinator took
  std::uint64_t refused() const { return refused_.load(); }    // refused or not reached

 private:
  void run();

  HostJoinOptions options_;
  std::string request_;  // the serialised JoinRequest (the same each time)
  std::atomic<std::uint64_t> accepted_{0}, refused_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dype::rt::daemon
