#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {
namespace {

template <typename E>
bool is(const std::exception& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

// The one exception -> status table of both front ends, one row per error class. The daemon's
// classes are siblings (none derives from another), so the rows' order does not matter; anything
// not listed is 500 / INTERNAL.
struct Row {
  bool (*matches)(const std::exception&);
  int http_status;
  grpc::StatusCode grpc_code;
  const char* reason;
};
using grpc::StatusCode;
constexpr Row kErrorTable[] = {
    {is<InputError>, 400, StatusCode::INVALID_ARGUMENT, "bad_input"},
    {is<NotFound>, 404, StatusCode::NOT_FOUND, "not_found"},
    {is<Overloaded>, 429, StatusCode::RESOURCE_EXHAUSTED, "overloaded"},
    {is<Unavailable>, 503, StatusCode::UNAVAILABLE, "unavailable"},
    {is<TooLarge>, 413, StatusCode::RESOURCE_EXHAUSTED, "too_large"},
    {is<Unauthorized>, 401, StatusCode::UNAUTHENTICATED, "unauthorized"},
    {is<Forbidden>, 403, StatusCode::PERMISSION_DENIED, "forbidden"},
    {is<AlreadyExists>, 409, StatusCode::ALREADY_EXISTS, "already_exists"},
    {is<RolledBack>, 409, StatusCode::ABORTED, "rolled_back"},
    {is<DeadlineExceeded>, 504, StatusCode::DEADLINE_EXCEEDED, "deadline_exceeded"},
    {is<NotSupported>, 501, StatusCode::UNIMPLEMENTED, "not_supported"},
};

}  // namespace

ErrorAnswer answer_for(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    for (const Row& row : kErrorTable)
      if (row.matches(e)) return {row.http_status, row.grpc_code, row.reason, e.what()};
    return {500, StatusCode::INTERNAL, "internal", e.what()};
  } catch (...) {
    return {500, StatusCode::INTERNAL, "internal", "unknown error"};
  }
}

}  // namespace dype::rt::daemon
