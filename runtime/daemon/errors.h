#pragma once
// Errors the daemon maps to HTTP/gRPC status codes. Bad input stays dype::InputError (400); these
// cover the other answers a client must be able to tell apart.
#include <string>

#include "kernels/error.h"

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

// Body above --max-request-bytes: 413.
class TooLarge : public Error {
 public:
  using Error::Error;
};

// Missing or wrong admin token: 401 / UNAUTHENTICATED.
class Unauthorized : public Error {
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

}  // namespace dype::rt::daemon
