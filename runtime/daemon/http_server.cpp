#include "runtime/daemon/http_server.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>

#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <httplib.h>

#include "runtime/daemon/errors.h"
#include "runtime/daemon/request_builder.h"
#include "runtime/daemon/tensor.h"

namespace dype::rt::daemon {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// CPU time of the calling thread: the handler thread blocks while the engine runs, so its CPU time
// over a request is the front end's own work, unaffected by waiting for a core on a busy machine.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, {{"error", message}});
}

// Runs a handler body and turns exceptions into {"error"} answers; returns the metrics reason.
template <typename F>
std::string guarded(httplib::Response& res, F&& f) {
  try {
    f();
    return "ok";
  } catch (const InputError& e) {
    send_error(res, 400, e.what());
    return "bad_input";
  } catch (const NotFound& e) {
    send_error(res, 404, e.what());
    return "not_found";
  } catch (const Overloaded& e) {
    send_error(res, 429, e.what());
    return "overloaded";
  } catch (const Unavailable& e) {
    send_error(res, 503, e.what());
    return "unavailable";
  } catch (const TooLarge& e) {
    send_error(res, 413, e.what());
    return "too_large";
  } catch (const Unauthorized& e) {
    send_error(res, 401, e.what());
    return "unauthorized";
  } catch (const RolledBack& e) {
    send_error(res, 409, e.what());
    return "rolled_back";
  } catch (const NotSupported& e) {
    send_error(res, 501, e.what());
    return "not_supported";
  } catch (const std::exception& e) {
    send_error(res, 500, e.what());
    return "internal";
  }
}

std::optional<std::size_t> header_length(const httplib::Request& req, std::size_t body_size) {
  if (!req.has_header("Inference-Header-Content-Length")) return std::nullopt;
  const std::string v = req.get_header_value("Inference-Header-Content-Length");
  std::size_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size())
    throw InputError("Inference-Header-Content-Length", "'" + v + "' is not a byte count");
  if (n > body_size)
    throw InputError("Inference-Header-Content-Length",
                     std::to_string(n) + " is past the end of the " + std::to_string(body_size) + "-byte body");
  return n;
}

// When httplib has parsed a request's line and headers (its pre-routing hook, on the thread that
// then runs the handler): the start of the server time an infer response reports.
struct Arrival {
  Clock::time_point wall = Clock::now();
  double cpu_us = 0.0;
};
thread_local Arrival tl_arrival;

// Receive buffer kept per worker thread between requests: a fresh buffer for every body page-faults
// on each 4 KiB page the kernel copies into (measured: most of the receive time for a 400 KB
// body). Above kKeepBodyBytes it is freed after the request so idle threads hold little memory.
// Not a std::string: growing one zero-fills the bytes the socket is about to overwrite (measured
// ~40 us per 400 KB body).
constexpr std::size_t kKeepBodyBytes = 4u << 20;  // x 32 worker threads: at most 128 MiB kept
class BodyBuffer {
 public:
  // Empty, with room for n bytes without reallocating.
  void reset(std::size_t n) {
    size_ = 0;
    if (n > capacity_) reallocate(n);
  }
  void append(const char* p, std::size_t n) {
    if (size_ + n > capacity_) reallocate(std::max(size_ + n, 2 * capacity_));
    std::memcpy(data_.get() + size_, p, n);
    size_ += n;
  }
  // Grows the size to n; the new bytes are the caller's to fill.
  void extend_to(std::size_t n) {
    if (n > capacity_) reallocate(n);
    size_ = n;
  }
  void release_if_above(std::size_t keep) {
    if (capacity_ > keep) *this = BodyBuffer{};
  }
  char* data() { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  void reallocate(std::size_t n) {
    std::unique_ptr<char[]> d(new char[n]);  // default-initialised: not zeroed
    if (size_ > 0) std::memcpy(d.get(), data_.get(), size_);
    data_ = std::move(d);
    capacity_ = n;
  }
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0, capacity_ = 0;
};
thread_local BodyBuffer tl_body;

// --- Reading a body straight from the connection's socket ------------------------------------
// httplib 0.11 (Debian's build is compiled, so CPPHTTPLIB_RECV_BUFSIZ cannot be raised) reads a
// body 4 KiB at a time with a poll() before each read: measured ~260 us of a 256 KB body's ~265 us
// receive, the largest part of the protocol overhead. It hands handlers no socket, so the
// connection's descriptor is found by its addresses, which httplib does give (cached per worker
// thread and checked on every request: a keep-alive connection stays on one thread), and the rest
// of the body is read from it in as few recv() calls as the kernel's buffer allows.

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  bool operator==(const Endpoint& o) const { return len == o.len && std::memcmp(&addr, &o.addr, len) == 0; }
};

bool endpoint_of(int fd, bool peer, Endpoint& e) {
  e.len = sizeof e.addr;
  auto* sa = reinterpret_cast<sockaddr*>(&e.addr);
  return (peer ? getpeername(fd, sa, &e.len) : getsockname(fd, sa, &e.len)) == 0;
}

// Whether `e` is ip:port as httplib prints them (getnameinfo, numeric host).
bool endpoint_is(const Endpoint& e, const std::string& ip, int port) {
  int p = -1;
  if (e.addr.ss_family == AF_INET) p = ntohs(reinterpret_cast<const sockaddr_in&>(e.addr).sin_port);
  else if (e.addr.ss_family == AF_INET6) p = ntohs(reinterpret_cast<const sockaddr_in6&>(e.addr).sin6_port);
  if (p != port) return false;
  char host[NI_MAXHOST];
  return getnameinfo(reinterpret_cast<const sockaddr*>(&e.addr), e.len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0 &&
         ip == host;
}

struct ConnectionCache {
  int fd = -1;
  Endpoint peer, local;
  std::string remote_addr, local_addr;
  int remote_port = -1, local_port = -1;
};
thread_local ConnectionCache tl_connection;

// The socket of the connection `req` came on, or -1 when it cannot be told.
int connection_fd(const httplib::Request& req) {
  ConnectionCache& c = tl_connection;
  if (c.fd >= 0 && c.remote_port == req.remote_port && c.local_port == req.local_port &&
      c.remote_addr == req.remote_addr && c.local_addr == req.local_addr) {
    Endpoint peer, local;
    if (endpoint_of(c.fd, true, peer) && peer == c.peer && endpoint_of(c.fd, false, local) && local == c.local)
      return c.fd;
  }
  c = ConnectionCache{};
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    int fd = -1;
    const std::string name = it->path().filename().string();
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    Endpoint peer, local;
    if (endpoint_of(fd, true, peer) && endpoint_is(peer, req.remote_addr, req.remote_port) &&
        endpoint_of(fd, false, local) && endpoint_is(local, req.local_addr, req.local_port)) {
      c = {fd, peer, local, req.remote_addr, req.local_addr, req.remote_port, req.local_port};
      break;
    }
  }
  return c.fd;
}

// Reads exactly n bytes, waiting up to timeout_ms for each arrival; false on timeout, close or error.
bool recv_exact(int fd, char* dst, std::size_t n, int timeout_ms) {
  while (n > 0) {
    const ssize_t r = recv(fd, dst, n, MSG_DONTWAIT);
    if (r > 0) {
      dst += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, timeout_ms);
    if (ready == 0 || (ready < 0 && errno != EINTR)) return false;
  }
  return true;
}

constexpr std::size_t kKeepAliveRequests = 100000;

// As httplib's default read timeout (CPPHTTPLIB_READ_TIMEOUT_SECOND), for the bytes read directly.
constexpr int kReadTimeoutMs = 5000;

// Placeholders for values known only once the response header is encoded: distinctive doubles
// whose JSON text (23 characters) is overwritten by the value, right-aligned (JSON allows the
// leading spaces), so the reported time covers the encoding too.
constexpr double kServerTimeSlot = 1.2345678901234567e+300;
constexpr double kServerCpuSlot = 1.2345678901234567e+301;

void fill_slot(std::string& body, double slot, double value) {
  static const std::string time_text = json_number_text(kServerTimeSlot), cpu_text = json_number_text(kServerCpuSlot);
  const std::string& placeholder = slot == kServerTimeSlot ? time_text : cpu_text;
  const std::size_t at = body.find(placeholder);
  if (at == std::string::npos) throw Error("response header lost its placeholder " + placeholder);
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed, 1);
  const auto n = static_cast<std::size_t>(end - text);
  if (ec != std::errc() || n > placeholder.size())
    throw Error("value " + std::to_string(value) + " does not fit its response placeholder");
  char* slot_text = body.data() + at;
  std::memset(slot_text, ' ', placeholder.size() - n);
  std::memcpy(slot_text + placeholder.size() - n, text, n);
}

json tensor_specs(const std::vector<TensorSpec>& specs) {
  json a = json::array();
  for (const TensorSpec& t : specs) a.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
  return a;
}

json body_json(const httplib::Request& req) {
  if (req.body.empty()) return json::object();
  try {
    json j = json::parse(req.body);
    if (!j.is_object()) throw InputError("request body", "must be a JSON object");
    return j;
  } catch (const json::parse_error& e) {
    throw InputError("request body", std::string("malformed JSON: ") + e.what());
  }
}

std::string string_field(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) throw InputError(key, "missing or not a string");
  return j[key].get<std::string>();
}

}  // namespace

void configure_allocator_for_serving() {
  // 32 MiB is the largest mmap threshold glibc accepts; bigger blocks (a 100 MB request) are still
  // mapped and returned at once. Setting it also stops glibc raising it on its own. The trim
  // threshold above it keeps freed blocks of that size for reuse instead of returning the pages.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

HttpServer::HttpServer(InferenceService& service, GraphRegistry& graphs, Metrics& metrics, ServerOptions options,
                       AdminHooks hooks)
    : service_(service),
      graphs_(graphs),
      metrics_(metrics),
      options_(std::move(options)),
      admission_(options_.max_queue, metrics),
      admin_(service, std::move(hooks), options_.admin_token, options_.bitstream_dir) {
  http_ = std::make_unique<httplib::Server>();
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  http_->set_payload_max_length(options_.max_request_bytes);
  // Without TCP_NODELAY a response written as headers then body waits on the client's delayed
  // ACK (Nagle), adding milliseconds to every keep-alive request.
  http_->set_tcp_nodelay(true);
  // httplib closes a keep-alive connection after 5 requests by default: every client then pays a
  // reconnect, and each new TCP connection starts again with a small receive window, so 400 KB
  // bodies crawl in until it has grown. Idle connections still close after httplib's 5 s.
  http_->set_keep_alive_max_count(kKeepAliveRequests);
  routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::routes() {
  httplib::Server& s = *http_;
  // Body above the limit: httplib answers 413 before any handler; give it the protocol's body.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413) {
      metrics_.record("", "too_large", 0.0);
      send_error(res, 413, "request body exceeds --max-request-bytes (" + std::to_string(options_.max_request_bytes) + " bytes)");
    } else if (res.status == 404) {
      send_error(res, 404, "no such route");
    } else {
      send_error(res, res.status, "HTTP status " + std::to_string(res.status));
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    tl_arrival = Arrival{Clock::now(), thread_cpu_us()};
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    } catch (...) {
      send_error(res, 500, "unknown error");
    }
  });

  s.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"live", true}}); });
  s.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, ready() ? 200 : 503, {{"ready", ready()}});
  });
  s.Get("/v2", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"name", "dype"}, {"version", "0.1.0"},
                         {"extensions", {"binary_tensor_data", "dype_graphs", "dype_admin", "dype_plan"}}});
  });
  s.Get("/v2/models", [this](const httplib::Request&, httplib::Response& res) {
    json a = json::array();
    for (const ModelInfo& m : service_.models()) a.push_back({{"name", m.name}, {"family", m.family}});
    send_json(res, 200, {{"models", a}});
  });
  const std::string model_re = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  s.Get(model_re, [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const ModelInfo m = service_.model(req.matches[1]);
      send_json(res, 200, {{"name", m.name}, {"versions", {"1"}}, {"platform", "dype_" + m.family},
                           {"inputs", tensor_specs(m.inputs)}, {"outputs", tensor_specs(m.outputs)}});
    });
  });
  s.Get(model_re + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const bool ok = service_.model_ready(req.matches[1]) && ready();
      send_json(res, ok ? 200 : 503, {{"name", req.matches[1].str()}, {"ready", ok}});
    });
  });

  // The body is read here rather than by httplib, which grows req.body chunk by chunk (a 100 MB
  // body would be re-copied by every reallocation): one buffer sized from Content-Length, with
  // the binary section starting on a 64-byte boundary so INT64/FP32 tensors can be read in
  // place. Binary tensors then view this buffer; only x is copied, once, into the engine's tensor.
  // A binary output is sent from the engine's answer as it lies, after the JSON header.
  s.Post(model_re + "/infer", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& content_reader) {
    const Arrival arrival = tl_arrival;
    const std::string model = req.matches[1];
    BodyBuffer& buffer = tl_body;
    buffer.reset(0);
    std::size_t pad = 0;
    const bool received = [&] {
      std::optional<std::size_t> hl;
      if (req.has_header("Inference-Header-Content-Length")) {
        const std::string v = req.get_header_value("Inference-Header-Content-Length");
        std::size_t n = 0;
        if (std::from_chars(v.data(), v.data() + v.size(), n).ec == std::errc()) hl = n;
      }
      const std::size_t length = static_cast<std::size_t>(req.get_header_value<std::uint64_t>("Content-Length"));
      if (length > 0 && length <= options_.max_request_bytes) {
        buffer.reset(length + 64);
        const auto start = reinterpret_cast<std::uintptr_t>(buffer.data()) + (hl ? *hl : 0);
        pad = (64 - start % 64) % 64;
        buffer.extend_to(pad);
      }
      // Direct reads need the body's bytes as sent: not chunked, not compressed (httplib would
      // decode those), and within the limit (httplib answers 413 itself otherwise).
      const bool direct = length > 0 && length <= options_.max_request_bytes && !req.has_header("Content-Encoding") &&
                          !req.has_header("Transfer-Encoding") && req.has_header("Content-Length");
      const int fd = direct ? connection_fd(req) : -1;
      if (fd < 0) {
        return content_reader([&](const char* data, std::size_t n) {
          buffer.append(data, n);
          return true;
        });
      }
      // httplib may already hold the body's first bytes (read along with the headers): take that
      // one chunk through it and stop it there (it then marks the response 400; reset below).
      // After it, either the whole body is here or httplib's buffer is empty and the rest is
      // still on the socket.
      const int status = res.status;
      content_reader([&](const char* data, std::size_t n) {
        buffer.append(data, n);
        return false;
      });
      res.status = status;
      const std::size_t have = buffer.size() - pad;
      if (have == 0 || have > length) return false;
      buffer.extend_to(pad + length);
      return recv_exact(fd, buffer.data() + pad + have, length - have, kReadTimeoutMs);
    }();
    const auto t_read = Clock::now();
    const std::string_view request_body = std::string_view(buffer.data(), buffer.size()).substr(pad);
    std::string reason = guarded(res, [&] {
      if (!received) {
        if (res.status == 413)
          throw TooLarge("request body exceeds --max-request-bytes (" + std::to_string(options_.max_request_bytes) + " bytes)");
        throw InputError("request body", "could not be read in full");
      }
      if (req.matches[2].matched && req.matches[2].str() != "1")
        throw NotFound("model '" + model + "' has no version '" + req.matches[2].str() + "' (only 1)");
      service_.model(model);  // 404 before admission
      AdmissionControl::Ticket admitted(admission_);
      const InferRequest in =
          parse_infer_request(request_body, header_length(req, request_body.size()), /*borrow_binary=*/true);
      const auto t_parse = Clock::now();
      bool binary = in.binary_output;
      for (const RequestedOutput& o : in.outputs) binary = o.binary;
      Clock::time_point t_submit;
      std::future<HostTensor> answer = submit_infer(service_, graphs_, model, in, &t_submit);
      const auto y = std::make_shared<const HostTensor>(answer.get());
      const auto t_answer = Clock::now();
      const Tensor out = output_view(*y);
      // Measured: engine = submit to answer; server = arrival (after httplib parsed the request
      // line and headers, before routing) to the response header encoded, body read included;
      // server CPU = this thread's CPU time over the same span. Both are written last, over
      // placeholders in the encoded header, so they include its encoding. Phases: receive (body
      // read), parse (admission + JSON header + tensor views), build (engine request: x copy,
      // graph normalisation); the rest of server - engine is output encoding and routing.
      auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
      ResponseHeader h{.model_name = model, .id = in.id,
                       .parameters = {{"dype_engine_time_us", us(t_answer - t_submit)},
                                      {"dype_server_time_us", kServerTimeSlot},
                                      {"dype_server_cpu_us", kServerCpuSlot},
                                      {"dype_receive_us", us(t_read - arrival.wall)},
                                      {"dype_parse_us", us(t_parse - t_read)},
                                      {"dype_build_us", us(t_submit - t_parse)}}};
      EncodedBody body = encode_infer_response_header(h, {out}, {binary});
      fill_slot(body.body, kServerTimeSlot, us(Clock::now() - arrival.wall));
      fill_slot(body.body, kServerCpuSlot, thread_cpu_us() - arrival.cpu_us);
      res.status = 200;
      if (!body.header_length) {
        res.set_content(std::move(body.body), body.content_type);
        return;
      }
      res.set_header("Inference-Header-Content-Length", std::to_string(*body.header_length));
      auto header = std::make_shared<const std::string>(std::move(body.body));
      const std::string_view data = out.bytes();
      res.set_content_provider(
          header->size() + data.size(), body.content_type,
          [header, y, data](std::size_t offset, std::size_t, httplib::DataSink& sink) {
            const std::size_t hs = header->size();
            if (offset < hs && !sink.write(header->data() + offset, hs - offset)) return false;
            const std::size_t from = offset > hs ? offset - hs : 0;
            return sink.write(data.data() + from, data.size() - from);
          });
    });
    buffer.release_if_above(kKeepBodyBytes);
    metrics_.record(model, reason, std::chrono::duration<double>(Clock::now() - arrival.wall).count());
  });

  s.Post("/v2/dype/graphs", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      admission_.check_serving();
      const InferRequest in = parse_infer_request(req.body, header_length(req, req.body.size()));
      kernels::EdgeList edges = edges_from_request(in, in.int_parameter("num_nodes"));
      const std::int64_t n = edges.num_nodes, e = edges.num_edges();
      const std::string id = graphs_.add(std::move(edges));
      send_json(res, 200, {{"id", id}, {"num_nodes", n}, {"num_edges", e}});
    });
  });
  s.Delete("/v2/dype/graphs/([^/]+)", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      if (!graphs_.remove(req.matches[1])) throw NotFound("unknown graph id '" + req.matches[1].str() + "'");
      send_json(res, 200, {{"deleted", req.matches[1].str()}});
    });
  });

  // Admin: token checked first; AdminApi runs one call at a time.
  auto admin = [this](auto&& body) {
    return [this, body](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        admin_.authorize(req.get_header_value("Authorization"));
        send_json(res, 200, body(req));
      });
    };
  };
  auto model_param = [](const httplib::Request& req) {
    return req.has_param("model") ? std::optional<std::string>(req.get_param_value("model")) : std::nullopt;
  };
  s.Get("/v2/dype/admin/plan", admin([this, model_param](const httplib::Request& req) { return admin_.plan(model_param(req)); }));
  s.Post("/v2/dype/admin/mode", admin([this](const httplib::Request& req) {
    return admin_.set_mode(string_field(body_json(req), "mode"));
  }));
  s.Get("/v2/dype/admin/pareto", admin([this, model_param](const httplib::Request& req) { return admin_.pareto(model_param(req)); }));
  s.Get("/v2/dype/admin/devices", admin([this](const httplib::Request&) { return admin_.devices(); }));
  s.Post("/v2/dype/admin/devices/([^/]+)/(drain|undrain)", admin([this](const httplib::Request& req) {
    return admin_.drain_device(req.matches[1], req.matches[2] == "drain");
  }));
  s.Post("/v2/dype/admin/bitstreams/load", admin([this](const httplib::Request& req) {
    const json j = body_json(req);
    return admin_.load_bitstream(string_field(j, "device"), string_field(j, "path"));
  }));
  s.Post("/v2/dype/admin/bitstreams/unload", admin([this](const httplib::Request& req) {
    return admin_.unload_bitstream(string_field(body_json(req), "device"));
  }));
}

void HttpServer::start() {
  auto bind = [this](httplib::Server& s, int port) {
    const int p = port == 0 ? s.bind_to_any_port(options_.host) : (s.bind_to_port(options_.host, port) ? port : -1);
    if (p < 0) throw Error("cannot listen on " + options_.host + ":" + std::to_string(port));
    return p;
  };
  // httplib's stop() does nothing until the listen loop is running, so a stop() right after
  // start() would leave the thread blocked in accept() forever: return once it runs.
  auto wait_running = [](const httplib::Server& s) {
    for (int i = 0; i < 10000 && !s.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  http_port_ = bind(*http_, options_.http_port);
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  wait_running(*http_);
  if (options_.metrics_port >= 0) {
    metrics_http_ = std::make_unique<httplib::Server>();
    metrics_http_->new_task_queue = [] { return new httplib::ThreadPool(2); };
    metrics_http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_.render(service_.metrics_text() + "dype_ready " + (ready() ? "1" : "0") + "\n"),
                      "text/plain; version=0.0.4");
    });
    metrics_port_ = bind(*metrics_http_, options_.metrics_port);
    metrics_thread_ = std::thread([this] { metrics_http_->listen_after_bind(); });
    wait_running(*metrics_http_);
  }
}

void HttpServer::begin_shutdown() { admission_.begin_shutdown(); }

bool HttpServer::wait_idle(double timeout_s) { return admission_.wait_idle(timeout_s); }

void HttpServer::stop() {
  admission_.begin_shutdown();
  if (http_) http_->stop();
  if (metrics_http_) metrics_http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  if (metrics_thread_.joinable()) metrics_thread_.join();
}

}  // namespace dype::rt::daemon
