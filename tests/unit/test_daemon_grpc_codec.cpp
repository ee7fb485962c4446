// The gRPC codec's raw contents: viewed in the message (unary calls, where the message outlives
// the call), or moved out of it and held by the request (a stream, which reuses its message for the
// next read while the engine still reads this one's x in place).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/kserve/request_builder.h"
#include "runtime/daemon/proto/grpc_service.pb.h"

namespace dype::rt::daemon {
namespace {

inference::ModelInferRequest request_with_x(const std::vector<float>& x, std::int64_t rows,
                                            std::int64_t cols) {
  inference::ModelInferRequest r;
  r.set_model_name("gcn");
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(cols);
  r.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  return r;
}

TEST(DaemonGrpcCodec, StreamRequestsTakeTheirRawContentsWithoutCopying) {
  std::vector<float> x(64 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  auto msg = std::make_unique<inference::ModelInferRequest>(request_with_x(x, 64, 16));
  const char* received = msg->raw_input_contents(0).data();

  const InferRequest viewed = from_proto(*msg);
  EXPECT_EQ(viewed.inputs.at(0).bytes().data(), received) << "a unary call views the message";
  EXPECT_TRUE(viewed.held.empty());
  EXPECT_FALSE(features_in_place(viewed.inputs.at(0), 16, "in_features", viewed))
      << "a view nothing holds is copied";

  const InferRequest taken = take_from_proto(*msg);
  EXPECT_EQ(msg->raw_input_contents_size(), 0)
      << "moved out: the message is free for the next read";
  msg->Clear();
  msg.reset();
  const Tensor& t = taken.inputs.at(0);
  EXPECT_EQ(t.bytes().data(), received) << "the parser's buffer itself, not a copy";
  ASSERT_EQ(taken.held.size(), 1u);
  EXPECT_EQ(taken.held[0].first, "inputs['x']");
  EXPECT_NO_THROW(taken.held[0].second->check_read("inputs['x']"));
  const std::optional<MappedFeatures> f = features_in_place(t, 16, "in_features", taken);
  ASSERT_TRUE(f);
  EXPECT_EQ(reinterpret_cast<const char*>(f->data), received);
  EXPECT_EQ(f->rows, 64);
  EXPECT_EQ(std::memcmp(f->data, x.data(), x.size() * sizeof(float)), 0);
}

TEST(DaemonGrpcCodec, TakenContentsKeepTheSameChecks) {
  std::vector<float> x(8 * 4, 1.0f);
  x[3 * 4 + 2] = std::numeric_limits<float>::infinity();
  inference::ModelInferRequest r = request_with_x(x, 8, 4);
  const InferRequest in = take_from_proto(r);
  try {
    features_in_place(in.inputs.at(0), 4, "in_features", in);
    ADD_FAILURE() << "an infinite feature was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'[3][2]"), std::string::npos) << e.what();
  }
  // Two entries for one input, and a size that does not match the shape: refused as before.
  inference::ModelInferRequest two = request_with_x(x, 8, 4);
  two.add_raw_input_contents("abcd");
  EXPECT_THROW(take_from_proto(two), InputError);
  inference::ModelInferRequest short_x = request_with_x(std::vector<float>(5, 1.0f), 8, 4);
  EXPECT_THROW(take_from_proto(short_x), InputError);
}

}  // namespace
}  // namespace dype::rt::daemon
