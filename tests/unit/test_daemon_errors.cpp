// The daemon's one error table (runtime/daemon/errors.h): every exception a handler can throw maps
// to the HTTP status, gRPC code and metrics reason both front ends answer with, message intact.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kernels/error.h"
#include "runtime/daemon/errors.h"

using namespace dype;
using namespace dype::rt::daemon;
using grpc::StatusCode;

namespace {

template <typename E, typename... Args>
ErrorAnswer answer_to(Args&&... args) {
  return answer_for(std::make_exception_ptr(E(std::forward<Args>(args)...)));
}

void expect_answer(const ErrorAnswer& a, int http, StatusCode grpc, const std::string& reason, const std::string& message) {
  EXPECT_EQ(a.http_status, http) << reason;
  EXPECT_EQ(a.grpc_code, grpc) << reason;
  EXPECT_EQ(std::string(a.reason), reason);
  EXPECT_EQ(a.message, message) << reason;
}

}  // namespace

TEST(DaemonErrors, InputErrorIsBadRequestAndInvalidArgument) {
  expect_answer(answer_to<InputError>("inputs['x'].shape", "is negative"), 400, StatusCode::INVALID_ARGUMENT, "bad_input",
                "inputs['x'].shape: is negative");
}

TEST(DaemonErrors, NotFound) {
  expect_answer(answer_to<NotFound>("unknown model 'm'"), 404, StatusCode::NOT_FOUND, "not_found", "unknown model 'm'");
}

TEST(DaemonErrors, OverloadedIsTooManyRequestsAndResourceExhausted) {
  expect_answer(answer_to<Overloaded>("queue full"), 429, StatusCode::RESOURCE_EXHAUSTED, "overloaded", "queue full");
}

TEST(DaemonErrors, Unavailable) {
  expect_answer(answer_to<Unavailable>("server is shutting down"), 503, StatusCode::UNAVAILABLE, "unavailable",
                "server is shutting down");
}

TEST(DaemonErrors, TooLargeIsPayloadTooLargeAndResourceExhausted) {
  expect_answer(answer_to<TooLarge>("request body exceeds"), 413, StatusCode::RESOURCE_EXHAUSTED, "too_large",
                "request body exceeds");
}

TEST(DaemonErrors, UnauthorizedIsUnauthenticated) {
  expect_answer(answer_to<Unauthorized>("bad token"), 401, StatusCode::UNAUTHENTICATED, "unauthorized", "bad token");
}

TEST(DaemonErrors, RolledBackIsConflictAndAborted) {
  expect_answer(answer_to<RolledBack>("restored"), 409, StatusCode::ABORTED, "rolled_back", "restored");
}

TEST(DaemonErrors, NotSupportedIsUnimplemented) {
  expect_answer(answer_to<NotSupported>("no hook"), 501, StatusCode::UNIMPLEMENTED, "not_supported", "no hook");
}

TEST(DaemonErrors, AnyOtherExceptionIsInternal) {
  expect_answer(answer_to<Error>("engine failed"), 500, StatusCode::INTERNAL, "internal", "engine failed");
  expect_answer(answer_to<std::runtime_error>("boom"), 500, StatusCode::INTERNAL, "internal", "boom");
  expect_answer(answer_for(std::make_exception_ptr(42)), 500, StatusCode::INTERNAL, "internal", "unknown error");
}
