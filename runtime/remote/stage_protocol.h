#pragma once
// What a coordinator and a stage server say to each other over a UcxChannel (ucx_channel.h) for
// a remote pipeline stage (runtime/stage_link.h). Descriptions travel as u8 frames, tensors as
// float32 frames carrying the request's epoch and seq:
//
//   coordinator -> server   setup (once): model name and digest, kernels [first, last], devices
//   server -> coordinator   setup_ack: accepted (with where the stage runs) or refused, and why
//   coordinator -> server   request: epoch, seq, kernels, rows, window, graph (id; its CSR the
//                           first time), then one float32 frame per input tensor
//   server -> coordinator   reply: ok or the error (kind + message), then one float32 frame per
//                           output tensor
//
// A link may instead start with a probe (dype-calibrate --peer): the server answers it with a
// setup_ack, then every frame it receives with a one-byte u8 frame, until the link closes.
//
// Everything read from the wire is checked before anything is sized from it: a malformed
// description throws StageProtocolError naming the field.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace dype::rt::remote {

inline constexpr std::uint32_t kStageProtocolVersion = 1;

class StageProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class StageMsg : std::uint8_t { setup = 1, setup_ack = 2, request = 3, reply = 4, probe = 5 };

// A link that measures the path to the server rather than running a stage.
struct StageProbe {
  std::string token = "";  // the deployment's stage token ("" when none is set)
};

struct StageSetup {
  std::string model;
  std::uint64_t model_digest = 0;  // model_digest() of the coordinator's copy
  std::int32_t first = 0, last = 0;
  std::vector<std::string> devices;  // names of the server's devices the stage runs on
  std::string token = "";            // the deployment's shared stage token ("" when none is set)
};

struct StageSetupAck {
  bool ok = false;
  std::string message;            // why it was refused
  std::string where;              // "b/gpu0+gpu1"
  std::uint32_t graph_cache = 0;  // graphs the server keeps by id (the client mirrors it)
};

struct StageRequestHead {
  std::uint64_t epoch = 0, seq = 0;
  std::int32_t first = 0, last = 0;
  std::int64_t rows = 0;
  std::int64_t window = 0;
  std::uint64_t graph_id = 0;  // 0: no graph (transformer)
  std::uint32_t inputs = 0;    // float32 frames that follow
  std::shared_ptr<const Graph> graph;  // set when the graph travels with this request
};

// graph_unknown: the request named a graph the server no longer holds (the client sends it again).
enum class StageErrorKind : std::uint8_t { none = 0, input = 1, device = 2, other = 3, graph_unknown = 4 };

struct StageReplyHead {
  std::uint64_t seq = 0;
  StageErrorKind error = StageErrorKind::none;
  std::string message;
  std::uint32_t outputs = 0;  // float32 frames that follow
  double stage_s = 0.0;       // measured on the server: its pipeline's time for the request
};

std::vector<std::byte> encode(const StageSetup& m);
std::vector<std::byte> encode(const StageSetupAck& m);
// The graph's CSR is written only when `with_graph` (the server does not hold it yet).
std::vector<std::byte> encode(const StageRequestHead& m, const Graph* with_graph);
std::vector<std::byte> encode(const StageReplyHead& m);
std::vector<std::byte> encode(const StageProbe& m);

// The message kind of a u8 frame (StageProtocolError when empty or unknown).
StageMsg message_kind(std::span<const std::byte> frame);
StageSetup decode_setup(std::span<const std::byte> frame);
StageProbe decode_probe(std::span<const std::byte> frame);
StageSetupAck decode_setup_ack(std::span<const std::byte> frame);
// A graph that arrives is checked as a whole (indptr monotone from 0 to nnz, every index a node)
// and given a fresh process-local id; `graph_id` keeps the sender's.
StageRequestHead decode_request(std::span<const std::byte> frame);
StageReplyHead decode_reply(std::span<const std::byte> frame);

// A digest of what makes two copies of a model compute the same thing: family, kernel chain
// (ops, widths, epilogues) and every weight's values (FNV-1a, 64 bits).
std::uint64_t model_digest(const Model& model);

}  // namespace dype::rt::remote
