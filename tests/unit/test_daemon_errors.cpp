// The daemon's one error table (runtime/daemon/errors.h): every exception a handler can throw maps
// to the HTTP status, gRPC code and metrics reason both front ends answer with, message intact.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/metrics.h"

using namespace dype;
using namespace dype::rt::daemon;
using grpc::StatusCode;

namespace {

struct Expected {
  std::exception_ptr error;
  int http_status;
  StatusCode grpc_code;
  std::string reason;
  std::string message;
};

}  // namespace

TEST(DaemonErrors, EachExceptionMapsToItsHttpStatusGrpcCodeAndReason) {
  auto ep = [](auto e) { return std::make_exception_ptr(e); };
  const Expected cases[] = {
      {ep(InputError("inputs['x'].shape", "is negative")), 400, StatusCode::INVALID_ARGUMENT, "bad_input",
       "inputs['x'].shape: is negative"},
      {ep(NotFound("unknown model 'm'")), 404, StatusCode::NOT_FOUND, "not_found", "unknown model 'm'"},
      {ep(Overloaded("queue full")), 429, StatusCode::RESOURCE_EXHAUSTED, "overloaded", "queue full"},
      {ep(Unavailable("shutting down")), 503, StatusCode::UNAVAILABLE, "unavailable", "shutting down"},
      {ep(TooLarge("body too large")), 413, StatusCode::RESOURCE_EXHAUSTED, "too_large", "body too large"},
      {ep(Unauthorized("bad token")), 401, StatusCode::UNAUTHENTICATED, "unauthorized", "bad token"},
      {ep(RolledBack("plans restored")), 409, StatusCode::ABORTED, "rolled_back", "plans restored"},
      {ep(NotSupported("no hook")), 501, StatusCode::UNIMPLEMENTED, "not_supported", "no hook"},
      // Anything else is the server's fault.
      {ep(Error("engine failed")), 500, StatusCode::INTERNAL, "internal", "engine failed"},
      {ep(std::runtime_error("boom")), 500, StatusCode::INTERNAL, "internal", "boom"},
      {ep(42), 500, StatusCode::INTERNAL, "internal", "unknown error"},
  };
  for (const Expected& c : cases) {
    const ErrorAnswer a = answer_for(c.error);
    EXPECT_EQ(a.http_status, c.http_status) << c.reason;
    EXPECT_EQ(a.grpc_code, c.grpc_code) << c.reason;
    EXPECT_EQ(std::string(a.reason), c.reason);
    EXPECT_EQ(a.message, c.message) << c.reason;
  }
}

// Label values are escaped per the Prometheus text format, and once the served models are known
// every other name is counted under model="unknown".
TEST(DaemonMetrics, LabelValuesEscapedAndUnknownModelsBounded) {
  Metrics m;
  m.record("a\"b\\c\nd", "ok", 0.001);
  const std::string text = m.render("");
  EXPECT_NE(text.find("dype_requests_total{model=\"a\\\"b\\\\c\\nd\",result=\"ok\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dype_request_duration_seconds_count{model=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nd\""), std::string::npos) << text;

  Metrics served;
  served.set_served({"gcn"});
  served.record("gcn", "ok", 0.001);
  for (int i = 0; i < 100; ++i) served.record("nosuch" + std::to_string(i), "not_found", 0.0);
  EXPECT_EQ(served.count("gcn", "ok"), 1u);
  EXPECT_EQ(served.count("unknown", "not_found"), 100u);
  EXPECT_EQ(served.render("").find("nosuch"), std::string::npos);
}
