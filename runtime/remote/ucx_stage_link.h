#pragma once
// The coordinator side of a remote pipeline stage (runtime/stage_link.h over UCX): connects to a
// StageServer, sends the setup (model name and digest, kernels, devices) and then, per request,
// the request's description, its graph the first time the server sees it (the server keeps the
// last few by id; this side mirrors that cache) and the input tensors; takes back the outputs.
//
//   auto link = remote::UcxStageLink::connect(ctx, {"10.0.0.2", 7100}, model, "gcn",
//                                             /*first=*/2, /*last=*/3, {"gpu0", "gpu1"});
//   spec.stages.push_back({.first = 2, .last = 3, .remote = link});
//
// A transport failure, a peer that went away or a malformed answer throws hw::DeviceError naming
// where(), so the pipeline treats the remote stage as a failed device (the link is unusable
// after it); a request the server refused throws InputError with the server's reason.
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/remote/ucx_channel.h"
#include "runtime/stage_link.h"

namespace dype::rt::remote {

// What a link measured (this host's clock, and the server's for its stage).
struct StageLinkStats {
  std::int64_t requests = 0;        // answered without a transport failure
  std::int64_t graphs_sent = 0;
  double round_trip_s = 0.0;        // sum over requests: run() from first send to last output
  double remote_stage_s = 0.0;      // sum: the server's pipeline time for the same requests
  double last_round_trip_s = 0.0;
  double last_remote_stage_s = 0.0;
  // Host-side cost of the two hand-offs (there and back) that a request's round trip adds to
  // the stage's own time: description, graph and tensors framed, moved and unframed.
  double handoff_s() const { return round_trip_s - remote_stage_s; }
};

class UcxStageLink final : public StageLink {
 public:
  // Throws ChannelError when the server cannot be reached, InputError naming the server and its
  // reason when it refuses the setup.
  static std::shared_ptr<UcxStageLink> connect(std::shared_ptr<UcxContext> context, const HostPort& server,
                                               const Model& model, const std::string& model_name, int first,
                                               int last, std::vector<std::string> devices,
                                               ChannelOptions options = {}, const std::string& token = "");
  ~UcxStageLink() override;

  std::vector<HostTensor> run(const Request& request, std::uint64_t epoch, std::uint64_t seq, int first, int last,
                              std::span<const HostTensor> inputs) override;
  std::string where() const override { return where_; }
  // Closes the link cleanly (the server's serve() then returns).
  void close();
  StageLinkStats stats() const;

 private:
  UcxStageLink(UcxChannel channel, std::string where, std::uint32_t graph_cache);
  // Whether the server still holds graph `id` (and marks it most recently used); false: it will
  // after this request, which must carry it.
  bool server_has_graph(std::uint64_t id);
  void forget_graph(std::uint64_t id);
  std::vector<HostTensor> exchange(const Request& request, std::uint64_t epoch, std::uint64_t seq, int first, int last,
                                   std::span<const HostTensor> inputs, bool resend_graph);

  mutable std::mutex mu_;  // run() is called by one stage worker, close() and stats() perhaps by others
  StageLinkStats stats_;
  UcxChannel channel_;
  std::string where_;
  std::uint32_t graph_cache_ = 0;
  std::list<std::uint64_t> graphs_;  // most recently used first
  bool broken_ = false;
};

// The float32 frame of a host tensor, and back (rows and cols must fit 32 bits).
Activation to_frame(const HostTensor& t, std::uint64_t epoch, std::uint64_t seq);
// Sends `tensors` as float32 frames from their own memory (UcxChannel::send_borrowed) and waits
// until UCX is done with them; on any failure the channel is aborted before this throws, so the
// tensors may go as soon as it returns. InputError for shape-only or oversized tensors.
void send_tensors(UcxChannel& ch, std::span<const HostTensor> tensors, std::uint64_t epoch, std::uint64_t seq);
HostTensor from_frame(const Activation& a);

}  // namespace dype::rt::remote
