#include "runtime/remote/ucx_stage_link.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "hw/device.h"
#include "common/error.h"
#include "runtime/remote/stage_protocol.h"

namespace dype::rt::remote {

namespace {
void check_frame(const HostTensor& t) {
  if (t.size_only) throw InputError("remote stage", "shape-only (timing-only) tensors do not cross hosts");
  if (t.rows < 0 || t.cols < 0 || t.rows > UINT32_MAX || t.cols > UINT32_MAX)
    throw InputError("remote stage", "tensor " + std::to_string(t.rows) + " x " + std::to_string(t.cols) +
                                         " does not fit a frame");
}
}  // namespace

Activation to_frame(const HostTensor& t, std::uint64_t epoch, std::uint64_t seq) {
  check_frame(t);
  return Activation::copy_of(epoch, seq, static_cast<std::uint32_t>(t.rows), static_cast<std::uint32_t>(t.cols), t.data);
}

void send_tensors(UcxChannel& ch, std::span<const HostTensor> tensors, std::uint64_t epoch, std::uint64_t seq) {
  for (const HostTensor& t : tensors) check_frame(t);
  try {
    for (const HostTensor& t : tensors)
      ch.send_borrowed(epoch, seq, static_cast<std::uint32_t>(t.rows), static_cast<std::uint32_t>(t.cols), t.data);
    ch.flush();  // the tensors are the caller's: UCX must be done with them before this returns
  } catch (...) {
    ch.abort();
    throw;
  }
}

HostTensor from_frame(const Activation& a) {
  HostTensor t;
  t.rows = a.rows();
  t.cols = a.cols();
  const auto v = a.values();
  t.data.assign(v.begin(), v.end());
  return t;
}

UcxStageLink::UcxStageLink(UcxChannel channel, std::string where, std::uint32_t graph_cache)
    : channel_(std::move(channel)), where_(std::move(where)), graph_cache_(graph_cache) {}

UcxStageLink::~UcxStageLink() {
  try {
    close();
  } catch (...) {
    // The server may be gone; nothing is owed to it.
  }
}

std::shared_ptr<UcxStageLink> UcxStageLink::connect(std::shared_ptr<UcxContext> context, const HostPort& server,
                                                    const Model& model, const std::string& model_name, int first,
                                                    int last, std::vector<std::string> devices,
                                                    ChannelOptions options, const std::string& token) {
  UcxChannel ch = UcxChannel::connect(std::move(context), server, options);
  const std::string who = "remote stage at " + ch.peer();
  StageSetup setup{.model = model_name, .model_digest = model_digest(model), .first = first, .last = last,
                   .devices = std::move(devices), .token = token};
  ch.send(Activation::bytes_of(0, 0, encode(setup)));
  auto f = ch.recv();
  if (!f) throw InputError(who, "closed the link without answering the setup");
  if (f->dtype() != Dtype::u8) throw InputError(who, "answered the setup with a tensor");
  StageSetupAck ack;
  try {
    ack = decode_setup_ack(f->bytes());
  } catch (const StageProtocolError& e) {
    throw InputError(who, e.what());
  }
  if (!ack.ok) throw InputError(who, "refused the stage: " + ack.message);
  return std::shared_ptr<UcxStageLink>(new UcxStageLink(std::move(ch), ack.where, ack.graph_cache));
}

void UcxStageLink::close() {
  std::lock_guard lock(mu_);
  if (broken_) return;
  broken_ = true;
  channel_.close();
}

bool UcxStageLink::server_has_graph(std::uint64_t id) {
  auto it = std::find(graphs_.begin(), graphs_.end(), id);
  if (it != graphs_.end()) {
    graphs_.splice(graphs_.begin(), graphs_, it);
    return true;
  }
  if (graph_cache_ == 0) return false;
  graphs_.push_front(id);
  if (graphs_.size() > graph_cache_) graphs_.pop_back();  // the server evicts the same one
  return false;
}

StageLinkStats UcxStageLink::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void UcxStageLink::forget_graph(std::uint64_t id) { graphs_.remove(id); }

std::vector<HostTensor> UcxStageLink::run(const Request& request, std::uint64_t epoch, std::uint64_t seq, int first,
                                          int last, std::span<const HostTensor> inputs) {
  std::lock_guard lock(mu_);
  if (broken_) throw hw::DeviceError(where_, "the link failed earlier");
  try {
    return exchange(request, epoch, seq, first, last, inputs, /*resend_graph=*/false);
  } catch (const ChannelError& e) {
    broken_ = true;
    throw hw::DeviceError(where_, e.what());
  } catch (const ActivationError& e) {
    broken_ = true;
    throw hw::DeviceError(where_, e.what());
  } catch (const StageProtocolError& e) {
    broken_ = true;
    throw hw::DeviceError(where_, e.what());
  }
}

std::vector<HostTensor> UcxStageLink::exchange(const Request& request, std::uint64_t epoch, std::uint64_t seq,
                                               int first, int last, std::span<const HostTensor> inputs,
                                               bool resend_graph) {
  if (inputs.empty()) throw InputError("remote stage", "no input tensors");
  const Graph* g = request.graph().get();
  StageRequestHead head{.epoch = epoch,
                        .seq = seq,
                        .first = first,
                        .last = last,
                        .rows = inputs[0].rows,
                        .window = request.window(),
                        .graph_id = g ? g->id : 0,
                        .inputs = static_cast<std::uint32_t>(inputs.size()),
                        .graph = nullptr};
  if (g && g->size_only()) throw InputError("remote stage", "shape-only (timing-only) graphs do not cross hosts");
  const bool with_graph = g && (resend_graph || !server_has_graph(g->id));
  const auto t0 = std::chrono::steady_clock::now();
  if (with_graph) ++stats_.graphs_sent;
  channel_.send(Activation::bytes_of(epoch, seq, encode(head, with_graph ? g : nullptr)));
  send_tensors(channel_, inputs, epoch, seq);  // from the tensors' own memory, no copy

  auto f = channel_.recv();
  if (!f) throw ChannelError(ChannelError::Kind::peer_failed, "the server closed the link");
  if (f->dtype() != Dtype::u8) throw StageProtocolError("stage reply: a tensor came before the reply's description");
  const StageReplyHead reply = decode_reply(f->bytes());
  if (reply.seq != seq)
    throw StageProtocolError("stage reply.seq: " + std::to_string(reply.seq) + " answers request " + std::to_string(seq));
  std::vector<HostTensor> out;
  for (std::uint32_t i = 0; i < reply.outputs; ++i) {
    auto t = channel_.recv();
    if (!t) throw ChannelError(ChannelError::Kind::peer_failed, "the server closed the link inside a reply");
    if (t->dtype() != Dtype::f32 || t->seq() != seq)
      throw StageProtocolError("stage reply: output " + std::to_string(i) + " is not request " + std::to_string(seq) + "'s tensor");
    out.push_back(from_frame(*t));
  }
  const double rt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.requests;
  stats_.round_trip_s += rt;
  stats_.remote_stage_s += reply.stage_s;
  stats_.last_round_trip_s = rt;
  stats_.last_remote_stage_s = reply.stage_s;
  switch (reply.error) {
    case StageErrorKind::none:
      return out;
    case StageErrorKind::input:
      throw InputError(where_, reply.message);
    case StageErrorKind::graph_unknown:
      if (g && !resend_graph) {  // the server lost it (its cache and ours disagree): send it again
        forget_graph(g->id);
        return exchange(request, epoch, seq, first, last, inputs, /*resend_graph=*/true);
      }
      throw hw::DeviceError(where_, reply.message);
    case StageErrorKind::device:
    case StageErrorKind::other:
      break;
  }
  throw hw::DeviceError(where_, reply.message);
}

}  // namespace dype::rt::remote
