// The bounded JSON side of the KServe v2 protocol: infer requests parsed without a document tree
// (members in any order, data counted against the shape before any allocation, nesting bounded,
// invalid UTF-8 refused) and JSON outputs written number by number under a size bound.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/kserve/tensor.h"

using namespace dype;
using namespace dype::rt::daemon;

namespace {

std::string error_of(std::string_view body, std::optional<std::size_t> hl = std::nullopt) {
  try {
    parse_infer_request(body, hl);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REFUSED(body, text)                                                   \
  do {                                                                               \
    const std::string message_ = error_of(body);                                     \
    EXPECT_NE(message_.find(text), std::string::npos) << "message: " << message_;    \
  } while (0)

}  // namespace

// nlohmann writes keys sorted ("data" first), Triton's clients write name/shape/datatype first:
// both read the same, in place or from a copy.
TEST(DaemonJsonParse, MembersInAnyOrder) {
  const std::string data_first =
      R"({"inputs":[{"data":[[1,2],[3.5,-4e-3]],"datatype":"FP32","name":"x","shape":[2,2]}],"id":"a"})";
  const std::string data_last =
      R"({"id":"a","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3.5,-4e-3]]}]})";
  const std::string data_middle =
      R"({"inputs":[{"name":"x","data":[1,2,3.5,-4e-3],"parameters":{"other":[1,{"a":2}]},"shape":[2,2],"datatype":"FP32"}],"id":"a"})";
  for (const std::string& body : {data_first, data_last, data_middle}) {
    const InferRequest r = parse_infer_request(body, std::nullopt);
    EXPECT_EQ(r.id, "a");
    ASSERT_EQ(r.inputs.size(), 1u);
    EXPECT_EQ(r.inputs[0].shape, (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(r.inputs[0].f32(), (std::vector<float>{1, 2, 3.5f, -4e-3f})) << body;
    // In place: the bytes after the text are readable (a buffer with room, as the transport's).
    std::string padded = body + std::string(kJsonReadPaddingBytes, 'x');
    const InferRequest p = parse_infer_request(std::string_view(padded).substr(0, body.size()), std::nullopt, false,
                                               kJsonReadPaddingBytes);
    EXPECT_EQ(p.inputs[0].f32(), r.inputs[0].f32());
  }
}

TEST(DaemonJsonParse, EveryIntegerTypeWithItsRange) {
  auto one = [](const std::string& dt, const std::string& value) {
    return R"({"inputs":[{"name":"t","datatype":")" + dt + R"(","shape":[1],"data":[)" + value + "]}]}";
  };
  EXPECT_EQ(parse_infer_request(one("INT64", "-9223372036854775808"), std::nullopt).inputs[0].i64()[0],
            std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(parse_infer_request(one("INT32", "-7"), std::nullopt).inputs[0].i64()[0], -7);
  const InferRequest u = parse_infer_request(one("UINT64", "18446744073709551615"), std::nullopt);
  std::uint64_t big;
  std::memcpy(&big, u.inputs[0].bytes().data(), 8);
  EXPECT_EQ(big, std::numeric_limits<std::uint64_t>::max());
  const InferRequest b = parse_infer_request(
      R"({"inputs":[{"name":"b","datatype":"BOOL","shape":[3],"data":[true,false,true]}]})", std::nullopt);
  EXPECT_EQ(b.inputs[0].bytes(), std::string("\1\0\1", 3));
  EXPECT_REFUSED(one("INT8", "128"), "inputs['t'].data[0]: 128 does not fit INT8");
  EXPECT_REFUSED(one("UINT8", "-1"), "inputs['t'].data[0]: is negative, UINT8 is unsigned");
  EXPECT_REFUSED(one("INT64", "9223372036854775808"), "does not fit INT64");
  EXPECT_REFUSED(one("INT64", "1.5"), "inputs['t'].data[0]: is 1.5, INT64 needs an integer");
  EXPECT_REFUSED(one("INT64", "\"7\""), "inputs['t'].data[0]: is \"7\", not a number");
  EXPECT_REFUSED(one("BOOL", "1"), "inputs['t'].data[0]: is 1, BOOL needs true/false");
  EXPECT_REFUSED(one("FP32", "null"), "inputs['t'].data[0]: is null, not a number");
  EXPECT_REFUSED(one("FP16", "1"), "FP16 cannot be given as JSON data here");
  // A lone scalar is one element, as before.
  EXPECT_EQ(parse_infer_request(R"({"inputs":[{"name":"t","datatype":"FP32","shape":[1],"data":2.5}]})", std::nullopt)
                .inputs[0]
                .f32(),
            std::vector<float>{2.5f});
}

// The data is counted against the shape before anything is sized from the shape.
TEST(DaemonJsonParse, DeclaredShapeCheckedBeforeAllocating) {
  EXPECT_REFUSED(R"({"inputs":[{"data":[1,2],"datatype":"FP32","name":"x","shape":[1000000000000,64]}]})",
                 "inputs['x'].data: has 2 elements, shape [1000000000000,64] needs 64000000000000");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1000000000000,64],"data":[1,2]}]})",
                 "inputs['x'].data: has 2 elements, shape [1000000000000,64] needs 64000000000000");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[4611686018427387904,4],"data":[]}]})",
                 "inputs['x'].shape: [4611686018427387904,4] has too many elements");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[18446744073709551615],"data":[]}]})",
                 "has too many elements");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,"a"],"data":[1,2]}]})",
                 "inputs['x'].shape[1]: is \"a\", not an integer");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":7,"data":[1]}]})",
                 "inputs['x'].shape: must be an array of integers");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", "inputs['x'].shape: missing");
  EXPECT_REFUSED(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", "inputs[0].name: missing or not a string");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", "inputs['x'].datatype: missing or not a string");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4},"data":[1]}]})",
                 "inputs['x']: has both data and parameters.binary_data_size");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})",
                 "inputs['x']: has neither data nor parameters.binary_data_size");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":-4}}]})",
                 "inputs['x'].parameters.binary_data_size: must be a non-negative integer");
}

TEST(DaemonJsonParse, NestingBoundedWhereverTheParserDescends) {
  const std::string deep = std::string(20000, '[') + "1" + std::string(20000, ']');
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":)" + deep + "}]}",
                 "request body: JSON nested deeper than 64 levels");
  EXPECT_REFUSED(R"({"inputs":[{"data":)" + deep + R"(,"name":"x","shape":[1,16],"datatype":"FP32"}]})",
                 "request body: JSON nested deeper than 64 levels");
  EXPECT_REFUSED(R"({"parameters":{"graph_id":)" + deep + R"(},"inputs":[]})", "request body: JSON nested deeper than 64 levels");
  // Members the parser does not use are walked too, so an accepted body is never deeper than 64.
  const std::string x = R"({"name":"x","shape":[1],"datatype":"FP32","data":[1])";
  for (const std::string& body : {R"({"inputs":[],"extra":)" + deep + "}",
                                  R"({"inputs":[)" + x + R"(,"extra":)" + deep + "}]}",
                                  R"({"inputs":[)" + x + R"(,"parameters":{"extra":)" + deep + "}}]}",
                                  R"({"inputs":[],"outputs":[{"name":"y","extra":)" + deep + "}]}",
                                  R"({"inputs":[],"outputs":[{"name":"y","parameters":{"extra":)" + deep + "}}]}"})
    EXPECT_REFUSED(body, "request body: JSON nested deeper than 64 levels");
  // 64 levels in all are accepted: body, inputs, tensor, data and 60 more arrays.
  const std::string ok_data = std::string(61, '[') + "1" + std::string(61, ']');
  EXPECT_NO_THROW(parse_infer_request(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + ok_data + "}]}",
                                      std::nullopt));
  const std::string too_deep = std::string(62, '[') + "1" + std::string(62, ']');
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + too_deep + "}]}", "nested deeper than 64");
}

TEST(DaemonJsonParse, MalformedTextAndInvalidUtf8) {
  EXPECT_REFUSED("{not json", "request body: malformed JSON");
  EXPECT_REFUSED("", "request body: malformed JSON");
  EXPECT_REFUSED("{\"inputs\": [", "request body: malformed JSON");
  EXPECT_REFUSED(R"({"inputs":[]} {"more":1})", "request body: malformed JSON");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,]}]})", "malformed JSON");
  EXPECT_REFUSED("[1,2]", "request body: must be a JSON object");
  EXPECT_REFUSED("{\"id\":\"a\xff\",\"inputs\":[]}", "request body: malformed JSON");
  EXPECT_REFUSED("{\"inputs\":[{\"name\":\"x\xc3\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", "malformed JSON");
  EXPECT_REFUSED(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],"parameters":[]})",
                 "parameters: must be an object");
  EXPECT_REFUSED(R"({"inputs":{}})", "inputs: must be an array");
  EXPECT_REFUSED(R"({"id":"a"})", "inputs: missing");
  // Escapes are read as JSON means them.
  const InferRequest r = parse_infer_request(
      R"({"id":"q\"\u00e9","inputs":[{"name":"x\n","datatype":"FP32","shape":[1],"data":[1]}],"parameters":{"k\u0041":"v\\"}})",
      std::nullopt);
  EXPECT_EQ(r.id, "q\"\u00e9");
  EXPECT_EQ(r.inputs[0].name, "x\n");
  EXPECT_EQ(r.string_parameter("kA"), "v\\");
}

// Parameters read as nlohmann would read them; outputs' binary flags whatever the members' order.
TEST(DaemonJsonParse, ParametersAndRequestedOutputs) {
  const InferRequest r = parse_infer_request(
      R"({"outputs":[{"name":"y"},{"name":"p","parameters":{"binary_data":false}}],
          "inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],
          "parameters":{"window":3,"neg":-2,"f":0.5,"s":"t","b":true,"n":null,"o":{"a":[1,2]},"binary_data_output":true}})",
      std::nullopt);
  EXPECT_TRUE(r.binary_output);
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(r.outputs[0].binary);
  EXPECT_FALSE(r.outputs[1].binary);
  EXPECT_EQ(r.int_parameter("window"), 3);
  EXPECT_EQ(r.int_parameter("neg"), -2);
  {  // past int64: refused with the value sent, not wrapped to a negative
    const InferRequest big = parse_infer_request(
        R"({"inputs":[],"parameters":{"v":18446744073709551615,"m":9223372036854775807}})", std::nullopt);
    EXPECT_EQ(big.int_parameter("m"), std::numeric_limits<std::int64_t>::max());
    try {
      (void)big.int_parameter("v");
      ADD_FAILURE() << "2^64 - 1 read as an int64";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("parameters.v: is 18446744073709551615, past the largest integer"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(r.parameters.dump(), nlohmann::json::parse(R"({"window":3,"neg":-2,"f":0.5,"s":"t","b":true,"n":null,
                                                          "o":{"a":[1,2]},"binary_data_output":true})")
                                      .dump());
  EXPECT_REFUSED(R"({"inputs":[],"parameters":{"binary_data_output":1}})", "parameters.binary_data_output: must be a boolean");
  EXPECT_REFUSED(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]})",
                 "outputs[0].parameters.binary_data: must be a boolean");
  EXPECT_REFUSED(R"({"inputs":[],"outputs":[{"nom":"y"}]})", "outputs[0].name: missing or not a string");
}

// JSON outputs: floats written as the doubles they widen to, so they parse back equal; integers as
// integers; the encoding refused past its bound with a message naming the output and the remedy.
TEST(DaemonJsonParse, JsonOutputsRoundTripAndAreBounded) {
  std::vector<float> ys = {0.1f, -1.0f / 3, 1e-38f, 3.4028235e38f, 0.0f, -0.0f, 16777217.0f, 1.17549435e-38f};
  for (int i = 0; i < 1000; ++i) ys.push_back(std::sin(static_cast<float>(i) * 0.37f) * std::pow(10.0f, static_cast<float>(i % 20 - 10)));
  const Tensor y = Tensor::from_f32("y", {static_cast<std::int64_t>(ys.size())}, ys);
  const Tensor p = Tensor::from_i64("predictions", {3}, {std::numeric_limits<std::int64_t>::min(), 0, 42});
  const EncodedBody b = encode_infer_response({.model_name = "gcn", .id = "7"}, {y, p}, {false, false});
  EXPECT_FALSE(b.header_length);
  EXPECT_NE(b.body.find(R"("data":[-9223372036854775808,0,42],"datatype":"INT64","name":"predictions","shape":[3]})"),
            std::string::npos)
      << b.body.substr(0, 200);
  const InferResponse r = parse_infer_response(b.body, b.header_length);
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].f32(), ys);  // bit for bit (-0.0 == 0.0 aside, checked next)
  EXPECT_TRUE(std::signbit(r.outputs[0].f32()[5]));
  EXPECT_EQ(r.outputs[1].i64(), p.i64());
  // As nlohmann writes the same numbers.
  EXPECT_NE(b.body.find("\"data\":[0.10000000149011612,"), std::string::npos);

  const std::vector<float> big(100000, 0.123456789f);
  const Tensor large = Tensor::from_f32("y", {1000, 100}, big);
  try {
    encode_infer_response_header({.model_name = "gcn", .id = ""}, {large}, {false}, 1u << 20);
    ADD_FAILURE() << "a 2 MB JSON output passed a 1 MiB bound";
  } catch (const TooLarge& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("outputs['y']: FP32 [1000,100] as JSON data takes more than 1048576 bytes (--max-response-bytes)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("binary"), std::string::npos) << m;
  }
  // Refused at once when even the shortest numbers could not fit.
  EXPECT_THROW(encode_infer_response_header({.model_name = "gcn", .id = ""}, {large}, {false}, 100000), TooLarge);
  // The same output as binary data is not bounded by it; within the bound JSON is fine.
  EXPECT_NO_THROW(encode_infer_response_header({.model_name = "gcn", .id = ""}, {large}, {true}, 1024));
  EXPECT_NO_THROW(encode_infer_response_header({.model_name = "gcn", .id = ""}, {large}, {false}, 4u << 20));
}

TEST(DaemonJsonParse, ResponseErrorsAndOutputsAnyOrder) {
  try {
    parse_infer_response(R"({"error":"unknown model 'x'"})", std::nullopt);
    ADD_FAILURE() << "an error response parsed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), R"(server: "unknown model 'x'")");
  }
  const InferResponse r = parse_infer_response(
      R"({"outputs":[{"shape":[2],"name":"y","datatype":"INT64","data":[5,6]}],"parameters":{"t":1.5},"model_name":"m","id":"i"})",
      std::nullopt);
  EXPECT_EQ(r.model_name, "m");
  EXPECT_EQ(r.id, "i");
  EXPECT_EQ(r.outputs.at(0).i64(), (std::vector<std::int64_t>{5, 6}));
  EXPECT_EQ(r.parameters["t"], 1.5);
}

// Damaged bodies (bytes flipped, cut short, brackets and quotes inserted), parsed from a copy and in
// place: each parses or is refused with InputError, never another exception (nor, under the
// sanitizers, a bad read).
TEST(DaemonJsonParse, DamagedBodiesAreRefusedCleanly) {
  const std::string good =
      R"({"id":"r","parameters":{"window":3,"o":{"a":[1,2.5,"s"]}},"outputs":[{"name":"y","parameters":{"binary_data":true}}],)"
      R"("inputs":[{"name":"x","datatype":"FP32","shape":[2,3],"data":[[1,2,3],[4.5,-6e2,0.25]]},)"
      R"({"data":[0,1,1,0],"datatype":"INT64","name":"edge_index","shape":[2,2]}]})";
  ASSERT_NO_THROW(parse_infer_request(good, std::nullopt));
  std::mt19937 rng(19);
  const std::string specials = "[]{}\",:0-e.\\ \xff\xc3tfn";
  int parsed = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string b = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      const std::size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[at] = specials[rng() % specials.size()]; break;
        case 1: b.insert(at, 1, specials[rng() % specials.size()]); break;
        case 2: b.erase(at, 1 + rng() % 8); break;
        default: b.resize(at); break;
      }
      if (b.empty()) b = "{";
    }
    for (const bool in_place : {false, true}) {
      std::string buffer = b + std::string(in_place ? kJsonReadPaddingBytes : 0, '9');
      try {
        parse_infer_request(std::string_view(buffer).substr(0, b.size()), std::nullopt, false,
                            in_place ? kJsonReadPaddingBytes : 0);
        ++parsed;
      } catch (const InputError&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not an InputError: " << e.what() << "\nbody: " << b;
      }
    }
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(parsed, 10);
}
