#pragma once
// Reading an infer request's body into the worker's BodyBuffer, straight from the connection's
// socket where it can. httplib 0.11 (Debian's build is compiled, so CPPHTTPLIB_RECV_BUFSIZ cannot
// be raised) reads a body 4 KiB at a time with a poll() before each read: measured ~260 us of a
// 256 KB body's ~265 us receive, the largest part of the protocol overhead. It also grows req.body
// chunk by chunk (a 100 MB body would be re-copied by every reallocation). Here the body goes into
// one buffer sized from Content-Length, with the binary section (after the JSON header of
// Inference-Header-Content-Length bytes) starting on a 64-byte boundary so INT64/FP32 tensors can
// be read in place.
//
//   const ReceivedBody body = read_body(req, res, content_reader, max_request_bytes, worker_body_buffer());
//   if (!body.complete) ...          // res.status 413: over the limit; otherwise cut short
//   parse_infer_request(body.bytes, ...);
#include <cstddef>
#include <string_view>

#include "runtime/daemon/body_buffer.h"

namespace httplib {
struct Request;
struct Response;
class ContentReader;
}  // namespace httplib

namespace dype::rt::daemon {

struct ReceivedBody {
  bool complete = false;   // false: cut short, unreadable or over the limit (httplib set res.status 413)
  std::string_view bytes;  // the body as sent, inside `buffer`
};

// Reads the whole body of `req` into `buffer` (reset first). Chunked, compressed or oversized
// bodies go through httplib's `reader`; the rest is read from the socket after whatever httplib
// had already buffered.
ReceivedBody read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                       std::size_t max_request_bytes, BodyBuffer& buffer);

}  // namespace dype::rt::daemon
