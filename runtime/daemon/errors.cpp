#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {

// The one exception -> status table of both front ends. The daemon's classes are siblings (none
// derives from another), so only the catch-all's place at the end matters.
ErrorAnswer answer_for(std::exception_ptr error) {
  using grpc::StatusCode;
  try {
    std::rethrow_exception(error);
  } catch (const InputError& e) {
    return {400, StatusCode::INVALID_ARGUMENT, "bad_input", e.what()};
  } catch (const NotFound& e) {
    return {404, StatusCode::NOT_FOUND, "not_found", e.what()};
  } catch (const Overloaded& e) {
    return {429, StatusCode::RESOURCE_EXHAUSTED, "overloaded", e.what()};
  } catch (const Unavailable& e) {
    return {503, StatusCode::UNAVAILABLE, "unavailable", e.what()};
  } catch (const TooLarge& e) {
    return {413, StatusCode::RESOURCE_EXHAUSTED, "too_large", e.what()};
  } catch (const Unauthorized& e) {
    return {401, StatusCode::UNAUTHENTICATED, "unauthorized", e.what()};
  } catch (const RolledBack& e) {
    return {409, StatusCode::ABORTED, "rolled_back", e.what()};
  } catch (const NotSupported& e) {
    return {501, StatusCode::UNIMPLEMENTED, "not_supported", e.what()};
  } catch (const std::exception& e) {
    return {500, StatusCode::INTERNAL, "internal", e.what()};
  } catch (...) {
    return {500, StatusCode::INTERNAL, "internal", "unknown error"};
  }
}

}  // namespace dype::rt::daemon
