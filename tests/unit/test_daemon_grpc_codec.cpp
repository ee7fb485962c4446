// The gRPC codec's raw contents: viewed in the message (graph registration, where the message
// outlives the call), or received apart from it (grpc_wire.h: the raw infer methods) and held by
// the request, so the engine reads x in place after gRPC's buffer is gone.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/daemon/grpc/grpc_codec.h"
#include "runtime/daemon/grpc/grpc_wire.h"
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

// The request as the raw methods receive it: serialised, in gRPC's slices (here, one).
InferRequest receive(const inference::ModelInferRequest& r,
                     std::shared_ptr<ReceivedContents>* kept = nullptr) {
  const std::string bytes = r.SerializeAsString();
  grpc::Slice slice(bytes);
  const grpc::ByteBuffer buffer(&slice, 1);
  inference::ModelInferRequest header;
  auto raw = std::make_shared<ReceivedContents>();
  parse_infer_request(buffer, header, *raw);
  if (kept) *kept = raw;
  return from_received(header, raw);
}

TEST(DaemonGrpcCodec, ReceivedContentsAreReadInPlace) {
  std::vector<float> x(64 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  const inference::ModelInferRequest msg = request_with_x(x, 64, 16);

  const InferRequest viewed = from_proto(msg);
  EXPECT_EQ(viewed.inputs.at(0).bytes().data(), msg.raw_input_contents(0).data())
      << "views the message";
  EXPECT_TRUE(viewed.held.empty());
  EXPECT_FALSE(features_in_place(viewed.inputs.at(0), 16, "in_features", viewed))
      << "a view nothing holds is copied";

  std::shared_ptr<ReceivedContents> raw;
  const InferRequest taken = receive(msg, &raw);
  const Tensor& t = taken.inputs.at(0);
  ASSERT_EQ(raw->entries.size(), 1u);
  EXPECT_EQ(t.bytes().data(), reinterpret_cast<const char*>(raw->entries[0].data.get()))
      << "the received buffer itself, not a copy";
  EXPECT_TRUE(raw->entries[0].finite_f32);
  raw.reset();  // the request alone holds it now
  ASSERT_EQ(taken.held.size(), 1u);
  EXPECT_EQ(taken.held[0].first, "inputs['x']");
  EXPECT_NO_THROW(taken.held[0].second->check_read("inputs['x']"));
  EXPECT_TRUE(taken.held[0].second->known_finite_f32(t.bytes().data(), t.bytes().size()));
  EXPECT_FALSE(taken.held[0].second->known_finite_f32(t.bytes().data(), t.bytes().size() - 4))
      << "only the entry it checked, whole";
  const std::optional<MappedFeatures> f = features_in_place(t, 16, "in_features", taken);
  ASSERT_TRUE(f);
  EXPECT_EQ(reinterpret_cast<const char*>(f->data), t.bytes().data());
  EXPECT_EQ(f->rows, 64);
  EXPECT_EQ(std::memcmp(f->data, x.data(), x.size() * sizeof(float)), 0);
}

TEST(DaemonGrpcCodec, ReceivedContentsKeepTheSameChecks) {
  std::vector<float> x(8 * 4, 1.0f);
  x[3 * 4 + 2] = std::numeric_limits<float>::infinity();
  const InferRequest in = receive(request_with_x(x, 8, 4));
  try {
    features_in_place(in.inputs.at(0), 4, "in_features", in);
    ADD_FAILURE() << "an infinite feature was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'[3][2]"), std::string::npos) << e.what();
  }
  // Two entries for one input, and a size that does not match the shape: refused as before.
  inference::ModelInferRequest two = request_with_x(x, 8, 4);
  two.add_raw_input_contents("abcd");
  EXPECT_THROW(receive(two), InputError);
  inference::ModelInferRequest short_x = request_with_x(std::vector<float>(5, 1.0f), 8, 4);
  EXPECT_THROW(receive(short_x), InputError);
}

}  // namespace
}  // namespace dype::rt::daemon
