// The raw infer methods' wire format, checked against protobuf's own serialiser and parser: a
// request serialised by protobuf and cut into gRPC slices anywhere parses to the same message, its
// raw_input_contents copied once into aligned buffers checked for NaN/Inf; answers framed around
// the engine's memory parse, with protobuf, to the message a generated serialiser would write; and
// bytes that are not a ModelInferRequest are refused naming "request".
#include <gtest/gtest.h>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/daemon/grpc/grpc_wire.h"
#include "runtime/daemon/proto/grpc_service.pb.h"

namespace dype::rt::daemon {
namespace {

using google::protobuf::util::MessageDifferencer;

// `bytes` as gRPC might hand them over: in slices of the given sizes (the rest in one more).
grpc::ByteBuffer in_slices(const std::string& bytes, const std::vector<std::size_t>& sizes) {
  std::vector<grpc::Slice> slices;
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    n = std::min(n, bytes.size() - at);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  if (at < bytes.size()) slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string as_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Every field of a ModelInferRequest set, and two raw entries: x (large) and a small INT64 one.
inference::ModelInferRequest full_request(const std::vector<float>& x) {
  inference::ModelInferRequest r;
  r.set_model_name("gcn");
  r.set_model_version("3");
  r.set_id("req-7");
  (*r.mutable_parameters())["timeout"].set_int64_param(5000000);
  (*r.mutable_parameters())["graph_id"].set_string_param("g1");
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(static_cast<std::int64_t>(x.size() / 16));
  in->add_shape(16);
  auto* ids = r.add_inputs();
  ids->set_name("node_ids");
  ids->set_datatype("INT64");
  ids->add_shape(2);
  auto* shm = r.add_inputs();
  shm->set_name("edge_weight");
  shm->set_datatype("FP32");
  shm->add_shape(4);
  (*shm->mutable_parameters())["shared_memory_region"].set_string_param("w");
  (*shm->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  auto* out = r.add_outputs();
  out->set_name("y");
  (*out->mutable_parameters())["binary_data"].set_bool_param(true);
  r.add_raw_input_contents(as_bytes(x));
  const std::int64_t nodes[] = {3, 9};
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(nodes), sizeof nodes));
  return r;
}

TEST(DaemonGrpcWire, ParsesWhatProtobufSerialisesCutAnywhere) {
  std::vector<float> x(4096 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 977) * 0.25f - 7.0f;
  const inference::ModelInferRequest sent = full_request(x);
  const std::string bytes = sent.SerializeAsString();
  inference::ModelInferRequest expected = sent;
  expected.clear_raw_input_contents();
  // One slice; slices of 1 and 7 bytes (keys and lengths split); gRPC-like 8 KiB reads.
  for (const std::vector<std::size_t>& cuts : std::vector<std::vector<std::size_t>>{
           {}, {1, 1, 1, 7, 3, 1, 5, 13, 2}, std::vector<std::size_t>(64, 8192)}) {
    inference::ModelInferRequest header;
    ReceivedContents raw;
    parse_infer_request(in_slices(bytes, cuts), header, raw);
    std::string diff;
    MessageDifferencer d;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(expected, header)) << diff;
    ASSERT_EQ(raw.entries.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const ReceivedContents::Entry& e = raw.entries[static_cast<std::size_t>(i)];
      ASSERT_EQ(e.size, sent.raw_input_contents(i).size());
      EXPECT_EQ(std::memcmp(e.data.get(), sent.raw_input_contents(i).data(), e.size), 0);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(e.data.get()) % 64, 0u)
          << "aligned for the kernels";
    }
    EXPECT_TRUE(raw.entries[0].finite_f32);
    const std::vector<std::string_view> views = entry_views(raw);
    EXPECT_EQ(views[0], sent.raw_input_contents(0));
    EXPECT_EQ(views[1], sent.raw_input_contents(1));
  }
}

TEST(DaemonGrpcWire, FieldsInAnyOrderAndRepeatedSingularsParseAsProtobufParsesThem) {
  // raw_input_contents first, then the name twice (the last one wins): still a valid message.
  inference::ModelInferRequest a, b, c;
  a.add_raw_input_contents("abcd");
  b.set_model_name("first");
  b.set_id("x");
  c.set_model_name("second");
  const std::string bytes = a.SerializeAsString() + b.SerializeAsString() + c.SerializeAsString();
  inference::ModelInferRequest reference;
  ASSERT_TRUE(reference.ParseFromString(bytes));
  inference::ModelInferRequest header;
  ReceivedContents raw;
  parse_infer_request(in_slices(bytes, {3}), header, raw);
  EXPECT_EQ(header.model_name(), reference.model_name());
  EXPECT_EQ(header.id(), reference.id());
  ASSERT_EQ(raw.entries.size(), 1u);
  EXPECT_EQ(entry_views(raw)[0], reference.raw_input_contents(0));
  // An empty message is an empty request (protobuf's default values).
  ReceivedContents none;
  inference::ModelInferRequest empty;
  parse_infer_request(grpc::ByteBuffer(), empty, none);
  EXPECT_TRUE(none.entries.empty());
  EXPECT_EQ(empty.model_name(), "");
}

TEST(DaemonGrpcWire, NonFiniteValuesAreFoundWhereverTheSlicesCut) {
  for (const std::size_t bad : {std::size_t{0}, std::size_t{2047}, std::size_t{4095}}) {
    std::vector<float> x(4096, 1.5f);
    x[bad] =
        bad % 2 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
    inference::ModelInferRequest r;
    r.add_raw_input_contents(as_bytes(x));
    // A cut through the bad value's bytes.
    const std::string bytes = r.SerializeAsString();
    const std::size_t value_at = bytes.size() - x.size() * 4 + bad * 4;
    inference::ModelInferRequest header;
    ReceivedContents raw;
    parse_infer_request(in_slices(bytes, {value_at + 1, 2}), header, raw);
    ASSERT_EQ(raw.entries.size(), 1u);
    EXPECT_FALSE(raw.entries[0].finite_f32) << "value " << bad;
    EXPECT_FALSE(raw.known_finite_f32(raw.entries[0].data.get(), raw.entries[0].size));
  }
  // Not a whole number of FP32 values: nothing is known.
  inference::ModelInferRequest odd;
  odd.add_raw_input_contents("abcde");
  inference::ModelInferRequest header;
  ReceivedContents raw;
  parse_infer_request(in_slices(odd.SerializeAsString(), {}), header, raw);
  EXPECT_FALSE(raw.entries.at(0).finite_f32);
}

// Slices of random sizes (1 byte to past a 16 KiB frame, as gRPC's frames and reads cut them), a
// non-finite value at a random place or none: every byte lands, and the value is found exactly when
// there is one, whether the vector copy, a slice's edge or the bytes between took it.
TEST(DaemonGrpcWire, RandomCutsCopyEveryByteAndFindEveryNonFiniteValue) {
  std::mt19937 rng(20261202);
  for (int round = 0; round < 200; ++round) {
    std::vector<float> x(1 + rng() % 9000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 613) * 0.5f - 3.0f;
    inference::ModelInferRequest r;
    r.set_model_name("gcn");
    r.add_raw_input_contents(as_bytes(x));
    const std::size_t size = r.ByteSizeLong(), x_at = size - x.size() * 4;  // x comes last
    std::vector<std::size_t> cuts, edges;  // edges: where slices end, in x's bytes
    for (std::size_t at = 0; at < size;) {
      const std::size_t n = rng() % 4 == 0 ? 1 + rng() % 7 : 1 + rng() % 20000;
      cuts.push_back(n);
      at += n;
      if (at > x_at && at < size) edges.push_back(at - x_at);
    }
    // One round in three: none; else anywhere, or in the value a slice's edge cuts through.
    const bool has_bad = round % 3 != 0;
    if (has_bad) {
      const std::size_t bad = round % 3 == 1 && !edges.empty() ? edges[rng() % edges.size()] / 4
                                                               : rng() % x.size();
      x[bad] = round % 2 ? std::numeric_limits<float>::quiet_NaN()
                         : std::numeric_limits<float>::infinity();
      r.set_raw_input_contents(0, as_bytes(x));
    }
    const std::string bytes = r.SerializeAsString();
    inference::ModelInferRequest header;
    ReceivedContents raw;
    parse_infer_request(in_slices(bytes, cuts), header, raw);
    ASSERT_EQ(raw.entries.size(), 1u);
    ASSERT_EQ(raw.entries[0].size, x.size() * 4);
    EXPECT_EQ(std::memcmp(raw.entries[0].data.get(), x.data(), x.size() * 4), 0) << "round " << round;
    EXPECT_EQ(raw.entries[0].finite_f32, !has_bad) << "round " << round;
  }
}

TEST(DaemonGrpcWire, BytesThatAreNotARequestAreRefusedNamingTheRequest) {
  const std::string valid = full_request(std::vector<float>(64, 1.0f)).SerializeAsString();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {valid.substr(0, valid.size() - 3), "bytes with"},           // the last raw entry cut short
      {std::string("\x3a\xff\xff\xff\xff\x0f", 6), "bytes with"},  // raw_input_contents of 4 GiB
      {std::string("\x0a", 1), "varint cut short"},                // a key, then nothing
      {std::string("\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12), "longer than 10 bytes"},
      {std::string("\x0b", 1), "wire type 3"},  // a group
      {std::string("\x0e", 1), "wire type 6"},
      {std::string("\x02\x00", 2), "field number 0"},
      {std::string("\x2a\x02\xff\xff", 4), "protobuf could not parse"},  // inputs: a broken message
  };
  for (const auto& [bytes, what] : cases) {
    inference::ModelInferRequest header;
    ReceivedContents raw;
    try {
      parse_infer_request(in_slices(bytes, {1}), header, raw);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("request"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

// Differential against protobuf's own parser: a valid request mutated thousands of ways (bytes
// flipped, cut short, spliced). Whatever protobuf accepts is parsed to the same message and
// contents; whatever is refused is refused with an InputError (never another exception, and never
// a crash: the sanitizer builds run this too). The one difference allowed: groups (wire types 3
// and 4, deprecated, never in this proto) are refused here where protobuf would keep them as
// unknown fields.
TEST(DaemonGrpcWire, MutatedRequestsParseAsProtobufParsesThemOrAreRefused) {
  std::vector<float> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const std::string valid = full_request(x).SerializeAsString();
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {  // splitmix64: the same mutations on every platform
    state += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  int accepted = 0, refused = 0;
  const google::protobuf::LogSilencer quiet;  // protobuf logs every invalid UTF-8 string it refuses
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = next() % bytes.size();
      switch (next() % 3) {
        case 0:
          bytes[at] = static_cast<char>(next());
          break;  // flip
        case 1:
          bytes.resize(at);
          break;  // cut
        default:
          bytes.insert(at, 1 + next() % 3, static_cast<char>(next()));
          break;  // splice
      }
      if (bytes.empty()) bytes = "\x0a";
    }
    inference::ModelInferRequest reference;
    const bool protobuf_ok = reference.ParseFromString(bytes);
    inference::ModelInferRequest header;
    ReceivedContents raw;
    bool ours_ok = true;
    std::string why;
    try {
      parse_infer_request(in_slices(bytes, {next() % 64 + 1, next() % 512 + 1}), header, raw);
    } catch (const InputError& e) {
      ours_ok = false;
      why = e.what();
    }
    if (ours_ok) {
      ++accepted;
      ASSERT_TRUE(protobuf_ok) << "accepted what protobuf refuses, round " << round;
      std::vector<std::string_view> views = entry_views(raw);
      ASSERT_EQ(views.size(), static_cast<std::size_t>(reference.raw_input_contents_size()))
          << round;
      for (std::size_t i = 0; i < views.size(); ++i)
        EXPECT_EQ(views[i], reference.raw_input_contents(static_cast<int>(i))) << round;
      reference.clear_raw_input_contents();
      EXPECT_TRUE(MessageDifferencer::Equals(reference, header)) << round;
    } else {
      ++refused;
      EXPECT_NE(why.find("request"), std::string::npos) << why;
      if (protobuf_ok) {
        EXPECT_TRUE(why.find("wire type 3") != std::string::npos ||
                    why.find("wire type 4") != std::string::npos)
            << "refused what protobuf accepts, round " << round << ": " << why;
      }
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);
}

std::string joined(const grpc::ByteBuffer& b, std::vector<grpc::Slice>* slices) {
  EXPECT_TRUE(b.Dump(slices).ok());
  std::string s;
  for (const grpc::Slice& sl : *slices)
    s.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return s;
}

TEST(DaemonGrpcWire, AnswersAreSentFromTheEnginesMemoryAndParseAsProtobufWritesThem) {
  auto y = std::make_shared<std::vector<float>>(70000);
  for (std::size_t i = 0; i < y->size(); ++i) (*y)[i] = static_cast<float>(i) / 3.0f;
  const std::string small = "tiny";
  inference::ModelInferResponse head;
  head.set_model_name("gcn");
  head.set_model_version("1");
  head.set_id("req-7");
  (*head.mutable_parameters())["dype_engine_time_us"].set_double_param(12.5);
  head.add_outputs()->set_name("y");
  head.add_outputs()->set_name("predictions");
  const std::string_view y_bytes(reinterpret_cast<const char*>(y->data()),
                                 y->size() * sizeof(float));
  std::weak_ptr<std::vector<float>> watch = y;

  inference::ModelInferResponse expected = head;
  expected.add_raw_output_contents(std::string(y_bytes));
  expected.add_raw_output_contents(small);
  {
    const grpc::ByteBuffer framed = frame_infer_response(head, {y_bytes, small}, std::move(y));
    std::vector<grpc::Slice> slices;
    inference::ModelInferResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(joined(framed, &slices)));
    EXPECT_TRUE(MessageDifferencer::Equals(expected, parsed));
    bool in_place = false;
    for (const grpc::Slice& s : slices)
      in_place |= reinterpret_cast<const char*>(s.begin()) == y_bytes.data();
    EXPECT_TRUE(in_place) << "y is a slice of the engine's memory, not a copy";
    EXPECT_FALSE(watch.expired()) << "held while gRPC may still send it";
    slices.clear();

    inference::ModelStreamInferResponse stream_head;
    *stream_head.mutable_infer_response() = head;
    const grpc::ByteBuffer streamed =
        frame_stream_response(stream_head, {y_bytes, small}, watch.lock());
    inference::ModelStreamInferResponse stream_parsed, stream_expected;
    *stream_expected.mutable_infer_response() = expected;
    ASSERT_TRUE(stream_parsed.ParseFromString(joined(streamed, &slices)));
    EXPECT_TRUE(MessageDifferencer::Equals(stream_expected, stream_parsed));
  }
  EXPECT_TRUE(watch.expired()) << "released once gRPC let go of the slices";

  // An error: its message and the request's name and id, nothing else.
  inference::ModelStreamInferResponse error;
  error.set_error_message("input 'x' is NaN");
  error.mutable_infer_response()->set_model_name("gcn");
  std::vector<grpc::Slice> slices;
  inference::ModelStreamInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(joined(frame_stream_response(error, {}, nullptr), &slices)));
  EXPECT_TRUE(MessageDifferencer::Equals(error, parsed));
  // A response that already carries contents is a programming error, not a silent duplicate.
  inference::ModelInferResponse carrying;
  carrying.add_raw_output_contents("x");
  EXPECT_THROW(frame_infer_response(carrying, {}, nullptr), Error);
}

}  // namespace
}  // namespace dype::rt::daemon
