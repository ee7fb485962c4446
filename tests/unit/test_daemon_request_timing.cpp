// The server times an HTTP infer response reports (runtime/daemon/kserve/request_timing.h): placeholders
// in the encoded header are overwritten in place, right-aligned, so the JSON stays valid and the
// body keeps its length.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "runtime/daemon/kserve/request_timing.h"
#include "runtime/daemon/kserve/tensor.h"

using namespace dype;
using namespace dype::rt::daemon;

namespace {
std::string header_with_slots() {
  ResponseHeader h{.model_name = "gcn", .id = "r1",
                   .parameters = {{"dype_server_time_us", kServerTimeSlot}, {"dype_server_cpu_us", kServerCpuSlot}}};
  return encode_infer_response_header(h, {}, {}).body;
}
}  // namespace

TEST(DaemonRequestTiming, FillSlotWritesBothValuesInPlace) {
  std::string body = header_with_slots();
  const std::size_t size = body.size();
  fill_slot(body, kServerTimeSlot, 123.456);
  fill_slot(body, kServerCpuSlot, 7.0);
  EXPECT_EQ(body.size(), size);
  const auto j = nlohmann::json::parse(body);
  EXPECT_DOUBLE_EQ(j["parameters"]["dype_server_time_us"].get<double>(), 123.5);
  EXPECT_DOUBLE_EQ(j["parameters"]["dype_server_cpu_us"].get<double>(), 7.0);
}

TEST(DaemonRequestTiming, FillSlotRefusesAMissingPlaceholderOrAValueTooLong) {
  std::string body = header_with_slots();
  fill_slot(body, kServerTimeSlot, 1.0);
  EXPECT_THROW(fill_slot(body, kServerTimeSlot, 2.0), Error);  // already filled
  EXPECT_THROW(fill_slot(body, kServerCpuSlot, 1e30), Error);  // 32 characters do not fit in 23
}

TEST(DaemonRequestTiming, ThreadCpuTimeAdvances) {
  const Arrival a{std::chrono::steady_clock::now(), thread_cpu_us()};
  volatile double sink = 0.0;
  for (int i = 0; i < 2000000; ++i) sink = sink + 1.0;
  EXPECT_LT(a.cpu_us, thread_cpu_us());
  EXPECT_GE(elapsed_us(a.wall, std::chrono::steady_clock::now()), 0.0);
}
