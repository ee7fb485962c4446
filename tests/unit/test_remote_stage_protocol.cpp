// The remote stage protocol's descriptions (runtime/remote/stage_protocol.h): what is encoded
// decodes to the same values, and every malformed or hostile description is refused naming the
// field, before anything is sized from it.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/model.h"
#include "runtime/remote/stage_protocol.h"

namespace dype::rt::remote {
namespace {

std::shared_ptr<const Graph> small_graph() {
  return Graph::from_edges(random_graph(50, 200, 3), /*gcn_norm=*/true);
}

std::string refusal(std::span<const std::byte> frame) {
  try {
    decode_request(frame);
  } catch (const StageProtocolError& e) {
    return e.what();
  }
  return "(accepted)";
}

template <typename T>
void poke(std::vector<std::byte>& frame, std::size_t at, T v) {
  std::memcpy(frame.data() + at, &v, sizeof v);
}

// Offsets in a request frame: kind (1), version (4), epoch, seq (8 each), first, last (4 each),
// rows, window (8 each), graph_id (8), inputs (4), with_graph (1), then the graph.
constexpr std::size_t kRowsAt = 1 + 4 + 8 + 8 + 4 + 4;
constexpr std::size_t kInputsAt = kRowsAt + 8 + 8 + 8;
constexpr std::size_t kGraphAt = kInputsAt + 4 + 1;
constexpr std::size_t kIndptrAt = kGraphAt + 8 + 8 + 4 + 8;  // its entry count, then the entries

StageRequestHead head_for(const Graph& g) {
  return {.epoch = 3, .seq = 41, .first = 2, .last = 3, .rows = g.nodes, .window = 0, .graph_id = g.id, .inputs = 1,
          .graph = nullptr};
}

TEST(RemoteStageProtocol, RequestWithGraphRoundTrips) {
  auto g = small_graph();
  const auto frame = encode(head_for(*g), g.get());
  EXPECT_EQ(message_kind(frame), StageMsg::request);
  const StageRequestHead h = decode_request(frame);
  EXPECT_EQ(h.epoch, 3u);
  EXPECT_EQ(h.seq, 41u);
  EXPECT_EQ(h.first, 2);
  EXPECT_EQ(h.last, 3);
  EXPECT_EQ(h.rows, g->nodes);
  EXPECT_EQ(h.graph_id, g->id);
  ASSERT_TRUE(h.graph);
  EXPECT_NE(h.graph->id, g->id) << "a graph that arrives gets an id of this process";
  EXPECT_EQ(h.graph->indptr, g->indptr);
  EXPECT_EQ(h.graph->indices, g->indices);
  EXPECT_EQ(h.graph->values, g->values);
  EXPECT_EQ(h.graph->degree_skew, g->degree_skew);
  // Without the graph: only its id travels.
  const StageRequestHead bare = decode_request(encode(head_for(*g), nullptr));
  EXPECT_FALSE(bare.graph);
  EXPECT_EQ(bare.graph_id, g->id);
}

TEST(RemoteStageProtocol, SetupAckAndReplyRoundTrip) {
  const StageSetup s = decode_setup(encode(StageSetup{.model = "gcn", .model_digest = 77, .first = 1, .last = 2,
                                                      .devices = {"gpu0", "gpu1"}}));
  EXPECT_EQ(s.model, "gcn");
  EXPECT_EQ(s.model_digest, 77u);
  EXPECT_EQ(s.devices, (std::vector<std::string>{"gpu0", "gpu1"}));
  const StageSetupAck a = decode_setup_ack(encode(StageSetupAck{.ok = true, .message = "", .where = "b/fpga0", .graph_cache = 16}));
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.where, "b/fpga0");
  EXPECT_EQ(a.graph_cache, 16u);
  const StageReplyHead r = decode_reply(encode(StageReplyHead{.seq = 9, .error = StageErrorKind::device, .message = "gpu0: lost", .outputs = 0}));
  EXPECT_EQ(r.seq, 9u);
  EXPECT_EQ(r.error, StageErrorKind::device);
  EXPECT_EQ(r.message, "gpu0: lost");
}

TEST(RemoteStageProtocol, MalformedRequestsAreRefusedNamingTheField) {
  auto g = small_graph();
  const auto good = encode(head_for(*g), g.get());
  EXPECT_EQ(refusal(std::span(good).first(10)), "stage request.epoch: truncated (10 bytes in all)");
  auto bad = good;
  bad[0] = std::byte{4};
  EXPECT_EQ(refusal(bad), "stage request.kind: is 4, expected 3");
  bad = good;
  poke<std::uint32_t>(bad, 1, 9);
  EXPECT_EQ(refusal(bad), "stage request.version: 9, this build speaks 1");
  bad = good;
  poke<std::int64_t>(bad, kRowsAt, -5);
  EXPECT_EQ(refusal(bad), "stage request.rows: -5 is not in [1, 2^31)");
  bad = good;
  poke<std::uint32_t>(bad, kInputsAt, 1000);
  EXPECT_EQ(refusal(bad), "stage request.inputs: 1000 tensors (1 to 16)");
  // A graph that declares 2^30 rows in a small frame is refused before anything is allocated.
  bad = good;
  poke<std::int64_t>(bad, kGraphAt, std::int64_t{1} << 30);
  EXPECT_EQ(refusal(bad), "stage request.graph.indptr: has 51 entries, expected 1073741825");
  bad = good;
  poke<std::uint64_t>(bad, kIndptrAt, std::uint64_t{1} << 62);
  EXPECT_EQ(refusal(bad), "stage request.graph.indptr: has 4611686018427387904 entries, expected 51");
  // A column outside the graph, and an indptr that decreases.
  bad = good;
  const std::size_t indices_at = kIndptrAt + 8 + 51 * 4 + 8;
  poke<std::int32_t>(bad, indices_at, 50);
  EXPECT_EQ(refusal(bad), "stage request.graph.indices: has column 50 outside [0, nodes)");
  bad = good;
  poke<std::int32_t>(bad, kIndptrAt + 8 + 4 * 4, 1 << 30);
  EXPECT_NE(refusal(bad).find("stage request.graph.indptr: decreases at row"), std::string::npos);
  // Bytes after the end.
  bad = good;
  bad.push_back(std::byte{0});
  EXPECT_EQ(refusal(bad), "stage request.end: 1 bytes left over");
  EXPECT_THROW(message_kind({}), StageProtocolError);
  const std::byte unknown[] = {std::byte{77}};
  EXPECT_THROW(message_kind(unknown), StageProtocolError);
}

TEST(RemoteStageProtocol, HostileSetupIsRefused) {
  auto frame = encode(StageSetup{.model = "gcn", .model_digest = 1, .first = 0, .last = 1, .devices = {"gpu0"}});
  // The model name's length says 2^31 bytes.
  poke<std::uint32_t>(frame, 5, 1u << 31);
  try {
    decode_setup(frame);
    FAIL() << "accepted";
  } catch (const StageProtocolError& e) {
    EXPECT_STREQ(e.what(), "stage setup.model: length 2147483648 exceeds 65536");
  }
  EXPECT_THROW(decode_setup(encode(StageSetup{.model = "gcn", .model_digest = 1, .first = 3, .last = 1, .devices = {"gpu0"}})),
               StageProtocolError);
  EXPECT_THROW(decode_setup(encode(StageSetup{.model = "gcn", .model_digest = 1, .first = 0, .last = 1, .devices = {}})),
               StageProtocolError);
}

TEST(RemoteStageProtocol, ProbeRoundTripsAndHostileProbesAreRefused) {
  auto frame = encode(StageProbe{.token = "s3cret"});
  EXPECT_EQ(message_kind(frame), StageMsg::probe);
  EXPECT_EQ(decode_probe(frame).token, "s3cret");
  poke<std::uint32_t>(frame, 1, 1u << 30);  // the token's length
  EXPECT_THROW(decode_probe(frame), StageProtocolError);
  auto trailing = encode(StageProbe{.token = "x"});
  trailing.push_back(std::byte{0});
  EXPECT_THROW(decode_probe(trailing), StageProtocolError);
  EXPECT_THROW(decode_probe(encode(StageSetupAck{.ok = true, .message = "", .where = "b", .graph_cache = 0})),
               StageProtocolError) << "another kind";
  const std::vector<std::byte> unknown{std::byte{6}};
  EXPECT_THROW(message_kind(unknown), StageProtocolError);
}

TEST(RemoteStageProtocol, DigestTellsWeightsApart) {
  const Model a = Model::gcn({.layers = 2, .in_features = 8, .hidden = 4, .seed = 1});
  const Model b = Model::gcn({.layers = 2, .in_features = 8, .hidden = 4, .seed = 1});
  const Model c = Model::gcn({.layers = 2, .in_features = 8, .hidden = 4, .seed = 2});
  const Model d = Model::gin({.layers = 2, .in_features = 8, .hidden = 4, .seed = 1});
  EXPECT_EQ(model_digest(a), model_digest(b));
  EXPECT_NE(model_digest(a), model_digest(c));
  EXPECT_NE(model_digest(a), model_digest(d));
}

}  // namespace
}  // namespace dype::rt::remote
