// KServe v2 tensor parsing (JSON and binary extension), response encoding and request building with
// the validation a network input needs.
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/kserve/request_builder.h"
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

rt::Model small_gcn() { return rt::Model::gcn({.layers = 2, .in_features = 4, .hidden = 8, .seed = 3}); }

}  // namespace

TEST(DaemonProtocol, ParsesJsonTensorsNestedAndFlat) {
  const auto r = parse_infer_request(
      R"({"id":"r1","parameters":{"window":3},"inputs":[
          {"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3.5,4]]},
          {"name":"edge_index","datatype":"INT64","shape":[2,1],"data":[0,1]}]})",
      std::nullopt);
  EXPECT_EQ(r.id, "r1");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].f32(), (std::vector<float>{1, 2, 3.5f, 4}));
  EXPECT_EQ(r.inputs[1].i64(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(r.int_parameter("window"), 3);
}

TEST(DaemonProtocol, BinaryExtensionRoundTrip) {
  const std::vector<float> x{1.5f, -2.0f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<std::int64_t> e{0, 2, 1, 0};
  EncodedBody b = encode_infer_request("q", {Tensor::from_f32("x", {3, 1}, x), Tensor::from_i64("edge_index", {2, 2}, e)},
                                       {{"graph_id", "g1"}}, true, true);
  ASSERT_TRUE(b.header_length);
  const auto r = parse_infer_request(b.body, b.header_length);
  EXPECT_TRUE(r.binary_output);
  EXPECT_EQ(r.inputs[1].i64(), e);
  const auto xs = r.inputs[0].f32();
  EXPECT_EQ(xs[0], 1.5f);
  EXPECT_TRUE(std::isnan(xs[2]));  // binary can carry NaN; the request builder refuses it
  EXPECT_EQ(r.string_parameter("graph_id"), "g1");
}

TEST(DaemonProtocol, ResponseEncodingBothForms) {
  const Tensor y = Tensor::from_f32("y", {2, 2}, {1, 2, 3, 4});
  for (bool binary : {false, true}) {
    EncodedBody b = encode_infer_response({.model_name = "gcn", .id = "7"}, {y}, {binary});
    EXPECT_EQ(b.header_length.has_value(), binary);
    InferResponse r = parse_infer_response(b.body, b.header_length);
    EXPECT_EQ(r.model_name, "gcn");
    EXPECT_EQ(r.id, "7");
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].shape, (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(r.outputs[0].f32(), (std::vector<float>{1, 2, 3, 4}));
  }
}

// The header-only encoding plus the tensor bytes sent after it (from a view of the answer, as the
// HTTP front end does) is byte for byte the one-buffer body.
TEST(DaemonProtocol, ResponseHeaderThenViewedBytesEqualsWholeBody) {
  rt::HostTensor answer = rt::make_tensor(2, 3, {1, 2, 3, 4, 5, 6});
  const Tensor view = output_tensors(answer, {"y"}, /*view=*/true).at(0);
  ASSERT_TRUE(view.view);
  EXPECT_EQ(view.view->data(), reinterpret_cast<const char*>(answer.data.data()));
  const nlohmann::json params = {{"dype_engine_time_us", 1234.5}, {"whole", 2.0}, {"tiny", 1.5e-7}, {"huge", 1.2345678901234567e+300},
                                 {"count", 3}, {"name", "a \"quoted\" \\ name\n"}, {"flag", true}};
  for (const ResponseHeader& h : {ResponseHeader{.model_name = "gcn", .id = "7"},
                                  ResponseHeader{.model_name = "gcn", .id = "", .parameters = params},
                                  ResponseHeader{.model_name = "g\u00e9n", .id = "id\t\u00fc", .parameters = params}}) {
    for (bool binary : {false, true}) {
      const EncodedBody whole = encode_infer_response(h, output_tensors(answer, {"y"}, /*view=*/false), {binary});
      const EncodedBody head = encode_infer_response_header(h, {view}, {binary});
      EXPECT_EQ(head.header_length, whole.header_length);
      EXPECT_EQ(head.content_type, whole.content_type);
      EXPECT_EQ(head.body + (binary ? std::string(view.bytes()) : std::string()), whole.body);
    }
  }
}

// The arg-max per row (the first of equal maxima, as torch.argmax), beside the logits or alone.
TEST(DaemonProtocol, PredictionsAreTheArgMaxOfEachRow) {
  const rt::HostTensor answer = rt::make_tensor(3, 3, {0.1f, 0.7f, 0.2f, -1.0f, -3.0f, -2.0f, 5.0f, 1.0f, 5.0f});
  const std::vector<Tensor> both = output_tensors(answer, {"y", "predictions"}, /*view=*/false);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].name, "y");
  EXPECT_EQ(both[1].name, "predictions");
  EXPECT_EQ(both[1].datatype, "INT64");
  EXPECT_EQ(both[1].shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(both[1].i64(), (std::vector<std::int64_t>{1, 0, 0}));
  const std::vector<Tensor> alone = output_tensors(answer, {"predictions"}, /*view=*/true);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].i64(), (std::vector<std::int64_t>{1, 0, 0}));
}

TEST(DaemonProtocol, PreciseErrors) {
  EXPECT_NE(error_of("{not json").find("malformed JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"x","datatype":"FP33","shape":[1],"data":[1]}]})").find("unknown datatype 'FP33'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2,3]}]})")
                .find("has 3 elements, shape [2,2] needs 4"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"e","datatype":"INT64","shape":[2],"data":[1,2.5]}]})")
                .find("inputs['e'].data[1]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,-2],"data":[]}]})").find("shape[1]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":["a"]}]})").find("not a number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[]})", 100).find("past the end"), std::string::npos);
  // binary_data_size larger than what follows the header
  const std::string h = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  EXPECT_NE(error_of(h + "abcd", h.size()).find("runs past the end"), std::string::npos);
  EXPECT_NE(error_of(h + "abcdefgh12", h.size()).find("left over"), std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]})" "abcd",
                     std::string_view(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}}]})").size())
                .find("needs 8"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"id":3,"inputs":[]})").find("id"), std::string::npos);
  EXPECT_NE(error_of(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})")
                .find("given twice"),
            std::string::npos);
}

TEST(DaemonProtocol, BuildsGnnRequestAndMatchesReference) {
  const rt::Model m = small_gcn();
  GraphRegistry graphs;
  const auto r = parse_infer_request(
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3,4],"data":[1,2,3,4,5,6,7,8,9,10,11,12]},
                    {"name":"edge_index","datatype":"INT64","shape":[2,3],"data":[0,1,2,1,2,0]}]})",
      std::nullopt);
  const rt::Request req = build_request(m, r, graphs);
  EXPECT_EQ(req.graph()->nodes, 3);
  const rt::HostTensor y = rt::reference_forward(m, req);
  EXPECT_EQ(y.rows, 3);
  EXPECT_EQ(y.cols, m.output_cols());

  // The same graph registered once and referenced by id gives the same answer.
  const auto g = parse_infer_request(
      R"({"inputs":[{"name":"edge_index","datatype":"INT64","shape":[2,3],"data":[0,1,2,1,2,0]}]})", std::nullopt);
  const std::string id = graphs.add(edges_from_request(g, 3));
  auto by_id = parse_infer_request(
      R"({"parameters":{"graph_id":")" + id +
          R"("},"inputs":[{"name":"x","datatype":"FP32","shape":[3,4],"data":[1,2,3,4,5,6,7,8,9,10,11,12]}]})",
      std::nullopt);
  const rt::HostTensor y2 = rt::reference_forward(m, build_request(m, by_id, graphs));
  EXPECT_EQ(y.data, y2.data);
}

TEST(DaemonProtocol, RequestValidation) {
  const rt::Model m = small_gcn();
  GraphRegistry graphs;
  auto build_error = [&](const std::string& body) -> std::string {
    try {
      build_request(m, parse_infer_request(body, std::nullopt), graphs);
    } catch (const InputError& e) {
      return e.what();
    } catch (const NotFound& e) {
      return std::string("not found: ") + e.what();
    }
    return "";
  };
  const std::string x2 = R"({"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]})";
  EXPECT_NE(build_error(R"({"inputs":[)" + x2 + R"(,{"name":"edge_index","datatype":"INT64","shape":[2,1],"data":[0,2]}]})")
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(build_error(R"({"inputs":[)" + x2 + R"(,{"name":"edge_index","datatype":"INT64","shape":[2,1],"data":[-1,0]}]})"),
            "");
  EXPECT_NE(build_error(R"({"inputs":[)" + x2 + R"(,{"name":"edge_index","datatype":"FP32","shape":[2,1],"data":[0,1]}]})")
                .find("expected INT64"),
            std::string::npos);
  EXPECT_NE(build_error(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]},{"name":"edge_index","datatype":"INT64","shape":[2,1],"data":[0,1]}]})")
                .find("in_features = 4"),
            std::string::npos);
  EXPECT_NE(build_error(R"({"inputs":[)" + x2 + R"(,{"name":"edge_index","datatype":"INT64","shape":[3,1],"data":[0,1,1]}]})"), "");
  EXPECT_NE(build_error(R"({"inputs":[)" + x2 + R"(]})").find("edge_index"), std::string::npos);
  EXPECT_NE(build_error(R"({"parameters":{"graph_id":"g99"},"inputs":[)" + x2 + R"(]})").find("not found"),
            std::string::npos);
  EXPECT_NE(build_error(R"({"inputs":[)" + x2 + R"(,{"name":"bogus","datatype":"INT64","shape":[1],"data":[0]}]})")
                .find("bogus"),
            std::string::npos);
  // NaN / Inf features, only expressible in binary form
  std::vector<float> xs(8, 1.0f);
  xs[5] = std::numeric_limits<float>::infinity();
  EncodedBody b = encode_infer_request("", {Tensor::from_f32("x", {2, 4}, xs), Tensor::from_i64("edge_index", {2, 1}, {0, 1})},
                                       nlohmann::json::object(), true, false);
  try {
    build_request(m, parse_infer_request(b.body, b.header_length), graphs);
    FAIL() << "infinite feature accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'x'[1][1]"), std::string::npos) << e.what();
  }
  // x rows vs registered graph size
  const std::string id = graphs.add(edges_from_request(
      parse_infer_request(R"({"inputs":[{"name":"edge_index","datatype":"INT64","shape":[2,1],"data":[0,2]}]})", std::nullopt),
      3));
  EXPECT_NE(build_error(R"({"parameters":{"graph_id":")" + id + R"("},"inputs":[)" + x2 + R"(]})").find("3 nodes"),
            std::string::npos);
}

TEST(DaemonProtocol, TransformerNeedsWindow) {
  const rt::Model m = rt::Model::transformer({.family = rt::ModelFamily::transformer, .layers = 1, .d_model = 8,
                                              .heads = 2, .ffn = 16, .seed = 2});
  GraphRegistry graphs;
  std::vector<float> xs(5 * 8, 0.25f);
  auto body = [&](nlohmann::json params) {
    return encode_infer_request("", {Tensor::from_f32("x", {5, 8}, xs)}, params, false, false).body;
  };
  const rt::Request r = build_request(m, parse_infer_request(body({{"window", 2}}), std::nullopt), graphs);
  EXPECT_EQ(r.window(), 2);
  EXPECT_EQ(rt::reference_forward(m, r).rows, 5);
  EXPECT_THROW(build_request(m, parse_infer_request(body(nlohmann::json::object()), std::nullopt), graphs), InputError);
  EXPECT_THROW(build_request(m, parse_infer_request(body({{"window", -1}}), std::nullopt), graphs), InputError);
  EXPECT_THROW(build_request(m, parse_infer_request(body({{"window", "big"}}), std::nullopt), graphs), InputError);
}
