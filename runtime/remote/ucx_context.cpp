#include "runtime/remote/ucx_context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace dype::rt::remote {

namespace {

// Upper bound of one sleep, so a deadline is noticed even when no event arrives.
constexpr auto kMaxSleep = std::chrono::milliseconds(50);

}  // namespace

std::string ucx_failure(std::string_view what, ucs_status_t status) {
  return std::string(what) + ": " + ucs_status_string(status) + " (" +
         std::to_string(static_cast<int>(status)) + ")";
}

HostPort parse_host_port(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return ChannelError(ChannelError::Kind::setup,
                        "address '" + std::string(text) + "': " + why + " (expected HOST:PORT)");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) throw bad("no host or no port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.front() == '[') {  // [v6 address]:port
    if (host.back() != ']') throw bad("unclosed '['");
    host = host.substr(1, host.size() - 2);
  }
  unsigned long port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size()) {
    throw bad("port '" + std::string(port_text) + "' is not a number");
  }
  if (port > 65535) throw bad("port " + std::to_string(port) + " is out of range 0..65535");
  return HostPort{std::string(host), static_cast<std::uint16_t>(port)};
}

void resolve(const HostPort& where, sockaddr_storage& out, socklen_t& out_len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(where.port);
  const int rc = getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw ChannelError(ChannelError::Kind::setup,
                       "cannot resolve '" + where.host + "': " + gai_strerror(rc));
  }
  std::memset(&out, 0, sizeof out);
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  out_len = found->ai_addrlen;
  freeaddrinfo(found);
}

std::string to_string(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a.sin6_port));
  }
  return "(address family " + std::to_string(addr.ss_family) + ")";
}

std::uint16_t port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  return 0;
}

std::shared_ptr<UcxContext> UcxContext::create(const UcxOptions& options) {
  // A listener that closed a connection first leaves it in TIME_WAIT on its own port; without
  // SO_REUSEADDR the next listener on that address fails to bind for a minute (a stage server
  // listens again on its address after each coordinator's link). UCX reads this connection
  // manager setting only from the environment (ucp_config_modify does not reach it); a value the
  // user set is kept. Contexts are made at start-up, before other threads read the environment.
  setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) throw ChannelError(ChannelError::Kind::setup, ucx_failure("UCX: reading its configuration", st));
  if (!options.transports.empty()) {
    st = ucp_config_modify(config, "TLS", options.transports.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      throw ChannelError(ChannelError::Kind::setup,
                         ucx_failure("UCX: transports '" + options.transports + "'", st));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) {
    const char* env = std::getenv("UCX_TLS");
    const std::string tls = !options.transports.empty() ? options.transports
                            : env != nullptr        ? std::string(env) + " (UCX_TLS)"
                                                    : std::string("UCX's default");
    throw ChannelError(ChannelError::Kind::setup,
                       ucx_failure("UCX could not start with transports " + tls, st));
  }
  return std::shared_ptr<UcxContext>(new UcxContext(context, options));
}

UcxContext::~UcxContext() { ucp_cleanup(context_); }

UcxWorker::UcxWorker(std::shared_ptr<UcxContext> context)
    : context_(std::move(context)), spin_(context_->options().spin) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(context_->get(), &params, &worker_);
  if (st != UCS_OK) throw ChannelError(ChannelError::Kind::setup, ucx_failure("UCX: creating a worker", st));
  st = ucp_worker_get_efd(worker_, &event_fd_);
  if (st != UCS_OK) event_fd_ = -1;  // no sleeping then: progress_until only polls
}

UcxWorker::~UcxWorker() { ucp_worker_destroy(worker_); }

void UcxWorker::progress() { ucp_worker_progress(worker_); }

bool UcxWorker::progress_until(const std::function<bool()>& done, Clock::time_point deadline) {
  auto last_work = Clock::now();
  for (;;) {
    if (done()) return true;
    if (ucp_worker_progress(worker_) != 0) {
      last_work = Clock::now();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) return done();
    if (event_fd_ < 0 || now - last_work < spin_) continue;
    // Nothing happened for a while: arm the fd and sleep until UCX has an event. UCS_ERR_BUSY
    // means events are already pending, so progress again instead of sleeping.
    if (ucp_worker_arm(worker_) != UCS_OK) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    pollfd fd{.fd = event_fd_, .events = POLLIN, .revents = 0};
    poll(&fd, 1, static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(left.count() + 1, 1, kMaxSleep.count())));
    last_work = Clock::now();
  }
}

}  // namespace dype::rt::remote
