#pragma once
// Errors the daemon maps to HTTP/gRPC status codes. Bad input stays dype::InputError (400); these
// cover the other answers a client must be able to tell apart. answer_for() is the one table that
// maps them, used by both front ends, so the two protocols cannot drift apart:
//
//   try { ... } catch (...) {
//     const ErrorAnswer a = answer_for(std::current_exception());
//     // HTTP: a.http_status + {"error": a.message}; gRPC: {a.grpc_code, a.message}; metrics: a.reason
//   }
#include <exception>
#include <string>

#include <grpcpp/support/status_code_enum.h>

#include "common/error.h"

namespace dype::rt::daemon {

// Unknown model, graph id or route: 404 / NOT_FOUND.
class NotFound : public Error {
 public:
  using Error::Error;
};

// Admission queue full: 429 / RESOURCE_EXHAUSTED.
class Overloaded : public Error {
 public:
  using Error::Error;
};

// Shutting down or not ready: 503 / UNAVAILABLE.
class Unavailable : public Error {
 public:
  using Error::Error;
};

// Body above --max-request-bytes: 413 / RESOURCE_EXHAUSTED.
class TooLarge : public Error {
 public:
  using Error::Error;
};

// Missing or wrong admin token: 401 / UNAUTHENTICATED.
class Unauthorized : public Error {
 public:
  using Error::Error;
};

// Allowed to no one (shared memory while dype-serve runs without --allow-client-shm) or not to
// this client (another owner's region): 403 / PERMISSION_DENIED.
class Forbidden : public Error {
 public:
  using Error::Error;
};

// A name already taken (a shared-memory region registered twice): 409 / ALREADY_EXISTS, as Triton
// answers it.
class AlreadyExists : public Error {
 public:
  using Error::Error;
};

// A request's deadline (parameters.timeout, a gRPC deadline) passed before its answer: 504 /
// DEADLINE_EXCEEDED.
class DeadlineExceeded : public Error {
 public:
  using Error::Error;
};

// An operator change failed part-way and was undone (previous bitstream and plans restored):
// 409 / ABORTED.
class RolledBack : public Error {
 public:
  using Error::Error;
};

// The operation exists in the protocol but not in this server: 501 / UNIMPLEMENTED.
class NotSupported : public Error {
 public:
  using Error::Error;
};

// How a failed request is answered, whichever protocol it came on.
struct ErrorAnswer {
  int http_status = 500;
  grpc::StatusCode grpc_code = grpc::StatusCode::INTERNAL;
  const char* reason = "internal";  // the metrics' result label (dype_requests_total{result=...})
  std::string message;              // the exception's what()
};

// The answer for `error`: InputError 400 / INVALID_ARGUMENT, and each class above with the status
// its comment names; any other exception 500 / INTERNAL. errors.cpp holds the table.
ErrorAnswer answer_for(std::exception_ptr error);

}  // namespace dype::rt::daemon
