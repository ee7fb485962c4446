#pragma once
// The host side of a remote pipeline stage: listens for a coordinator's link (stage_link.h over
// UCX), checks its setup (the model is served here with the same weights, the devices exist and
// run the stage's kernels) and runs each request's kernels on this host's devices through an
// ordinary Pipeline over that part of the model, answering with the tensors the stage hands on.
//
//   remote::StageServer server(ctx, {"10.0.0.2", 7100}, find_model, system.devices(), {.host = "b"});
//   server.run();   // every link on its own thread, until stop() (serve(): one link, then return)
//
// A request that fails (bad input, a device error) is answered with the error and the link stays
// up; a device error leaves the stage failed for later requests too, as on one host.
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hw/device.h"
#include "runtime/model.h"
#include "runtime/remote/ucx_channel.h"

namespace dype::rt::remote {

struct StageServerOptions {
  ChannelOptions channel{.window = 8, .timeout = std::chrono::milliseconds(10'000)};
  std::uint32_t graph_cache = 16;  // graphs kept by the coordinator's id (least recently used go)
  std::string host = "worker";     // this host's name in the stage's where(): "b/gpu0+gpu1"
  // Set: a coordinator's setup must carry this token (compared in constant time), else its link
  // is refused before anything else is looked at. Empty: any coordinator that reaches the address.
  std::string token = "";
};

struct StageServerStats {
  std::atomic<std::int64_t> links{0};     // accepted
  std::atomic<std::int64_t> requests{0};  // answered, ok or not
  std::atomic<std::int64_t> failed{0};
  std::atomic<std::int64_t> graphs_received{0};
  std::atomic<std::int64_t> stray_frames{0};  // tensors of a request that was refused before they were read
};

class StageServer {
 public:
  using FindModel = std::function<const Model*(const std::string& name)>;
  // Binds `listen` at once (ChannelError naming the address when it cannot).
  StageServer(std::shared_ptr<UcxContext> context, const HostPort& listen, FindModel models,
              std::vector<hw::Device*> devices, StageServerOptions options = {});
  ~StageServer();

  std::string address() const;
  std::uint16_t port() const;

  // Waits (up to the channel timeout: ChannelError(timeout)) for a coordinator, answers its setup
  // and serves its requests until it closes the link (returns normally) or fails (ChannelError
  // peer_failed). The listener stays bound for the next one.
  void serve();
  // Accepts links until stop(), serving each on its own thread (a coordinator opens one per stage
  // it places on this host, and a new plan's links while the old plan's drain). Returns once
  // stop() was called and every link has ended.
  void run();
  // Stops accepting (within its polling step, 1 s) and closes every link's
  // channel from its own thread at its next frame boundary. Thread-safe.
  void stop();
  const StageServerStats& stats() const { return stats_; }

 private:
  struct Session;
  UcxChannel accept_one(std::chrono::milliseconds wait);
  void serve_link(UcxChannel& ch);
  void serve_probe(UcxChannel& ch, std::span<const std::byte> hello);  // dype-calibrate --peer
  std::atomic<bool> stopping_{false};
  std::shared_ptr<UcxContext> context_;
  HostPort listen_;
  FindModel models_;
  std::vector<hw::Device*> devices_;
  StageServerOptions options_;
  std::unique_ptr<UcxAcceptor> listener_;
  std::uint16_t port_ = 0;
  StageServerStats stats_;
};

}  // namespace dype::rt::remote
