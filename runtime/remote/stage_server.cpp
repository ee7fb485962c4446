#include "runtime/remote/stage_server.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "common/error.h"
#include "runtime/pipeline.h"
#include "runtime/remote/stage_protocol.h"
#include "runtime/remote/ucx_stage_link.h"
#include "runtime/secret_compare.h"

namespace dype::rt::remote {

namespace {

void send_reply(UcxChannel& ch, std::uint64_t epoch, const StageReplyHead& head, const std::vector<HostTensor>& outputs) {
  ch.send(Activation::bytes_of(epoch, head.seq, encode(head)));
  send_tensors(ch, outputs, epoch, head.seq);  // from the outputs' own memory, no copy
}

void send_error(UcxChannel& ch, std::uint64_t epoch, std::uint64_t seq, StageErrorKind kind, const std::string& message) {
  send_reply(ch, epoch, StageReplyHead{.seq = seq, .error = kind, .message = message, .outputs = 0}, {});
}

// The graphs a coordinator sent, by its ids, least recently used evicted first (the coordinator
// mirrors this order, so it knows when to send a graph again).
class GraphCache {
 public:
  explicit GraphCache(std::uint32_t capacity) : capacity_(capacity) {}
  void put(std::uint64_t id, std::shared_ptr<const Graph> g) {
    if (capacity_ == 0) return;
    erase(id);
    order_.push_front(id);
    graphs_[id] = std::move(g);
    if (order_.size() > capacity_) {
      graphs_.erase(order_.back());
      order_.pop_back();
    }
  }
  std::shared_ptr<const Graph> get(std::uint64_t id) {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return nullptr;
    order_.remove(id);
    order_.push_front(id);
    return it->second;
  }

 private:
  void erase(std::uint64_t id) {
    if (graphs_.erase(id)) order_.remove(id);
  }
  std::uint32_t capacity_;
  std::list<std::uint64_t> order_;
  std::map<std::uint64_t, std::shared_ptr<const Graph>> graphs_;
};

}  // namespace

// One coordinator's link: its setup, the pipeline over its part of the model, its graphs.
struct StageServer::Session {
  const Model* model = nullptr;
  StageSetup setup;
  std::unique_ptr<Pipeline> pipeline;
  GraphCache graphs{0};
};

StageServer::StageServer(std::shared_ptr<UcxContext> context, const HostPort& listen, FindModel models,
                         std::vector<hw::Device*> devices, StageServerOptions options)
    : context_(std::move(context)), listen_(listen), models_(std::move(models)), devices_(std::move(devices)),
      options_(std::move(options)) {
  listener_ = std::make_unique<UcxAcceptor>(context_, listen_, options_.channel);
  port_ = listener_->port();
  listen_.port = port_;
}

StageServer::~StageServer() = default;

std::string StageServer::address() const { return listen_.host + ":" + std::to_string(port_); }
std::uint16_t StageServer::port() const { return port_; }

UcxChannel StageServer::accept_one(std::chrono::milliseconds wait) {
  UcxChannel ch = listener_->accept(wait);
  ++stats_.links;
  return ch;
}

void StageServer::serve() {
  UcxChannel ch = accept_one(options_.channel.timeout);
  serve_link(ch);
}

void StageServer::stop() { stopping_ = true; }

void StageServer::run() {
  std::vector<std::thread> links;
  // Accept (and serve each link) in short steps so that stop() is seen. The listener stays bound
  // the whole time: coordinators that connect at once (a re-plan linking several stages) queue.
  const auto poll = std::min(options_.channel.timeout, std::chrono::milliseconds(1000));
  while (!stopping_) {
    try {
      UcxChannel ch = accept_one(poll);
      links.emplace_back([this, c = std::make_shared<UcxChannel>(std::move(ch))] {
        try {
          serve_link(*c);
        } catch (const std::exception&) {
          // The coordinator went away or broke the protocol: this link ends, the others go on.
        }
      });
    } catch (const ChannelError&) {
      // Nobody knocked within the step, or a peer failed its greeting: keep listening.
    }
  }
  listener_.reset();
  for (auto& t : links) t.join();
}

void StageServer::serve_probe(UcxChannel& ch, std::span<const std::byte> hello) {
  try {
    const StageProbe probe = decode_probe(hello);
    if (!options_.token.empty() && !same_secret(probe.token, options_.token))
      throw InputError("stage probe.token", "does not match host " + options_.host + "'s stage token");
  } catch (const std::exception& e) {
    ch.send(Activation::bytes_of(0, 0, encode(StageSetupAck{.ok = false, .message = e.what(), .where = "", .graph_cache = 0})));
    ch.close();
    return;
  }
  ch.send(Activation::bytes_of(0, 0, encode(StageSetupAck{.ok = true, .message = "", .where = options_.host, .graph_cache = 0})));
  const std::vector<std::byte> ack{std::byte{1}};
  for (;;) {
    std::optional<Activation> f;
    try {
      f = ch.recv();
    } catch (const ChannelError& e) {
      if (e.kind() == ChannelError::Kind::timeout) continue;  // an idle probe is not an error
      return;
    }
    if (!f) return;
    ch.send(Activation::bytes_of(f->epoch(), f->seq(), ack));
  }
}

void StageServer::serve_link(UcxChannel& ch) {
  // Setup: everything is checked before the answer, and a refusal says why.
  auto first = ch.recv();
  if (!first) return;
  Session s;
  s.graphs = GraphCache(options_.graph_cache);
  std::string where;
  if (first->dtype() == Dtype::u8 && !first->bytes().empty() &&
      static_cast<std::uint8_t>(first->bytes()[0]) == static_cast<std::uint8_t>(StageMsg::probe)) {
    serve_probe(ch, first->bytes());
    return;
  }
  try {
    if (first->dtype() != Dtype::u8) throw InputError("stage setup", "the first frame is a tensor, not the setup");
    s.setup = decode_setup(first->bytes());
    if (!options_.token.empty() && !same_secret(s.setup.token, options_.token))
      throw InputError("stage setup.token", "does not match host " + options_.host + "'s stage token");
    s.model = models_(s.setup.model);
    if (!s.model) throw InputError("stage setup.model", "'" + s.setup.model + "' is not served on host " + options_.host);
    const auto digest = model_digest(*s.model);
    if (digest != s.setup.model_digest)
      throw InputError("stage setup.model_digest", "model '" + s.setup.model + "' on host " + options_.host +
                                                       " has other weights or kernels (load the same model on both hosts)");
    if (s.setup.last >= s.model->num_kernels())
      throw InputError("stage setup.last", "kernel " + std::to_string(s.setup.last) + " is past the model's " +
                                               std::to_string(s.model->num_kernels()));
    PipelineStage stage;
    stage.first = s.setup.first;
    stage.last = s.setup.last;
    for (const auto& name : s.setup.devices) {
      auto it = std::find_if(devices_.begin(), devices_.end(), [&](hw::Device* d) { return d->name() == name; });
      if (it == devices_.end()) throw InputError("stage setup.devices", "host " + options_.host + " has no device '" + name + "'");
      stage.devices.push_back(*it);
      where += (where.empty() ? "" : "+") + name;
    }
    where = options_.host + "/" + where;
    PipelineSpec spec;
    spec.stages.push_back(stage);
    spec.label = where;
    spec.first_kernel = s.setup.first;
    spec.last_kernel = s.setup.last;
    s.pipeline = std::make_unique<Pipeline>(*s.model, std::move(spec));
  } catch (const std::exception& e) {  // InputError, StageProtocolError: the refusal names the field
    ch.send(Activation::bytes_of(0, 0, encode(StageSetupAck{.ok = false, .message = e.what(), .where = "", .graph_cache = 0})));
    ch.close();
    return;
  }
  ch.send(Activation::bytes_of(0, 0, encode(StageSetupAck{.ok = true, .message = "", .where = where, .graph_cache = options_.graph_cache})));

  for (;;) {
    std::optional<Activation> f;
    try {
      f = ch.recv();
    } catch (const ChannelError& e) {
      if (e.kind() == ChannelError::Kind::timeout) {
        if (stopping_) return;           // the channel closes without waiting for the coordinator
        continue;                        // an idle coordinator is not a failed one
      }
      throw;
    } catch (const ActivationError&) {
      ++stats_.stray_frames;  // a refused frame: the request it belonged to is answered below
      continue;
    }
    if (!f) break;  // the coordinator closed the link
    if (f->dtype() != Dtype::u8) {
      ++stats_.stray_frames;  // a tensor of a request refused before its tensors were read
      continue;
    }
    const std::uint64_t epoch = f->epoch(), seq = f->seq();
    ++stats_.requests;
    StageRequestHead head;
    try {
      head = decode_request(f->bytes());
    } catch (const StageProtocolError& e) {
      ++stats_.failed;
      send_error(ch, epoch, seq, StageErrorKind::input, e.what());
      continue;
    }
    std::vector<HostTensor> inputs;
    std::string bad;
    for (std::uint32_t i = 0; i < head.inputs; ++i) {
      std::optional<Activation> t;
      try {
        t = ch.recv();
      } catch (const ActivationError& e) {
        bad = e.what();
        continue;
      }
      if (!t) throw ChannelError(ChannelError::Kind::peer_failed, "coordinator closed the link inside request " + std::to_string(seq));
      if (t->dtype() != Dtype::f32 || t->seq() != head.seq || t->rows() != head.rows) {
        bad = "input " + std::to_string(i) + " is not a " + std::to_string(head.rows) + "-row float32 tensor of request " +
              std::to_string(head.seq);
        continue;
      }
      inputs.push_back(from_frame(*t));
    }
    if (head.graph) {
      s.graphs.put(head.graph_id, head.graph);
      ++stats_.graphs_received;
    }
    if (bad.empty() && (head.first != s.setup.first || head.last != s.setup.last))
      bad = "kernels [" + std::to_string(head.first) + ", " + std::to_string(head.last) + "] are not this stage's [" +
            std::to_string(s.setup.first) + ", " + std::to_string(s.setup.last) + "]";
    if (!bad.empty()) {
      ++stats_.failed;
      send_error(ch, epoch, head.seq, StageErrorKind::input, "stage request: " + bad);
      continue;
    }
    std::shared_ptr<const Graph> graph;
    if (s.model->is_gnn()) {
      graph = head.graph_id ? s.graphs.get(head.graph_id) : nullptr;
      if (!graph) {
        ++stats_.failed;
        send_error(ch, epoch, head.seq, head.graph_id ? StageErrorKind::graph_unknown : StageErrorKind::input,
                   "stage request.graph_id: graph " + std::to_string(head.graph_id) + " is not held on host " + options_.host);
        continue;
      }
    }
    const std::int64_t cols = inputs.front().cols;
    auto request = std::make_shared<Request>(s.model->is_gnn() ? Request::gnn(graph, HostTensor::shape_only(head.rows, cols))
                                                               : Request::transformer(HostTensor::shape_only(head.rows, cols), head.window));
    std::promise<Completion> done;
    auto answer = done.get_future();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      s.pipeline->submit(Job{.seq = head.seq, .request = request, .inputs = std::move(inputs),
                             .done = [&done](Completion&& c) { done.set_value(std::move(c)); }});
    } catch (const std::exception& e) {
      ++stats_.failed;
      send_error(ch, epoch, head.seq, StageErrorKind::input, e.what());
      continue;
    }
    Completion c = answer.get();
    const double stage_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (c.error) {
      ++stats_.failed;
      StageErrorKind kind = StageErrorKind::other;
      std::string message;
      try {
        std::rethrow_exception(c.error);
      } catch (const hw::DeviceError& e) {
        kind = StageErrorKind::device;
        message = e.what();
      } catch (const InputError& e) {
        kind = StageErrorKind::input;
        message = e.what();
      } catch (const std::exception& e) {
        message = e.what();
      }
      send_error(ch, epoch, head.seq, kind, message);
      continue;
    }
    if (c.tensors.empty()) c.tensors.push_back(std::move(c.output));  // the stage ends the model
    send_reply(ch, epoch, StageReplyHead{.seq = head.seq, .error = StageErrorKind::none, .message = "", .outputs = static_cast<std::uint32_t>(c.tensors.size()), .stage_s = stage_s}, c.tensors);
  }
}

}  // namespace dype::rt::remote
