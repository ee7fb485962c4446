// bench_daemon_http_load: dype-serve's HTTP front end held under idle and slow connections, in one
// process, nothing mocked: the real EngineService (emulated paper testbed), the real HttpServer
// on 127.0.0.1 and a cpp-httplib client streaming infer requests (64-node registered graph, binary
// tensors) on one keep-alive connection, one request after another.
//
// The stream runs twice: quiet, then with --idle idle connections (connected, never sending) and
// --slow slow ones (each sending one header byte every second, reconnecting when the header
// timeout closes it) held open the whole time. Printed: round-trip median/p99 of both runs, the
// p99 ratio against the target (<= 2x the quiet p99), and requests lost (not answered 200).
//
//   bench_daemon_http_load [--requests 3000] [--idle 1000] [--slow 100]
// All times are wall clock on this machine (measured); the devices are emulated on the CPU.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "graph/generators.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/host_memory.h"
#include "bench/bench_common.h"

#include <httplib.h>  // after the project headers (its <resolv.h> macros break Eigen)

using namespace dype;
using namespace dype::rt::daemon;
using Clock = std::chrono::steady_clock;

namespace {

using bench::arg;
using bench::loadavg;
using bench::percentile;

int connect_to(int port, bool nonblocking) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    throw Error(std::string("connect: ") + std::strerror(errno));
  }
  if (nonblocking) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

struct StreamResult {
  std::vector<double> rtt_us;
  int lost = 0;
};

StreamResult stream(int port, const EncodedBody& body, int requests) {
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  c.set_read_timeout(60, 0);
  const httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(*body.header_length)}};
  StreamResult r;
  for (int i = 0; i < requests; ++i) {
    const auto t0 = Clock::now();
    auto res = c.Post("/v2/models/gcn/infer", h, body.body, "application/octet-stream");
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!res || res->status != 200) {
      ++r.lost;
      continue;
    }
    r.rtt_us.push_back(us);
  }
  return r;
}

// Slow clients: one header byte per second each; a connection the server closes is reopened.
class SlowClients {
 public:
  SlowClients(int port, int count) : port_(port) {
    for (int i = 0; i < count; ++i) fds_.push_back(connect_to(port, true));
    thread_ = std::thread([this] { run(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  int reconnects() const { return reconnects_.load(); }

 private:
  void run() {
    const std::string header = "POST /v2/models/gcn/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(4000, 'a');
    std::size_t at = 0;
    while (!stop_.load()) {
      for (int& fd : fds_) {
        const char ch = header[at % header.size()];
        if (send(fd, &ch, 1, MSG_NOSIGNAL) != 1) {
          close(fd);
          fd = connect_to(port_, true);
          ++reconnects_;
        }
      }
      ++at;
      for (int i = 0; i < 100 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reconnects_{0};
  std::thread thread_;
};

void print(const char* name, const StreamResult& r) {
  std::printf("  %-44s median %8.1f us   p90 %8.1f   p99 %8.1f   answered %zu, lost %d\n", name,
              percentile(r.rtt_us, 0.5), percentile(r.rtt_us, 0.9), percentile(r.rtt_us, 0.99), r.rtt_us.size(), r.lost);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int requests = std::stoi(arg(argc, argv, "--requests", "3000"));
    const int idle = std::stoi(arg(argc, argv, "--idle", "1000"));
    const int slow = std::stoi(arg(argc, argv, "--slow", "100"));
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    rt::retain_freed_host_memory();
    EngineServiceOptions so;
    so.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
    so.mode = "perf";
    so.models = default_models();
    EngineService service(so);
    GraphRegistry graphs;
    Metrics metrics;
    ServerOptions ho;
    ho.http_port = 0;
    ho.metrics_port = -1;
    HttpServer http(service, graphs, metrics, ho);
    http.start();
    std::printf("bench_daemon_http_load: %d requests per run, %d idle + %d slow connections; load average %s, "
                "%u hardware threads, open-file limit %llu\n",
                requests, idle, slow, loadavg().c_str(), std::thread::hardware_concurrency(),
                static_cast<unsigned long long>(lim.rlim_cur));

    const std::int64_t n = 64, f = service.model("gcn").model->spec().in_features;
    const kernels::EdgeList el = kernels::generate_uniform(n, 256, 7);
    const std::string gid = graphs.add(el);
    const EncodedBody body = encode_infer_request(
        "", {Tensor::from_f32("x", {n, f}, kernels::generate_features(n, f, 7))}, {{"graph_id", gid}}, true, true);
    stream(http.http_port(), body, 300);  // warm-up: plans, page faults

    const StreamResult quiet = stream(http.http_port(), body, requests);
    std::vector<int> idle_fds;
    for (int i = 0; i < idle; ++i) idle_fds.push_back(connect_to(http.http_port(), false));
    StreamResult loaded;
    int reconnects = 0;
    std::size_t open_during = 0;
    {
      SlowClients slow_clients(http.http_port(), slow);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      loaded = stream(http.http_port(), body, requests);
      reconnects = slow_clients.reconnects();
      open_during = http.transport_counters().open.load();
    }
    for (int fd : idle_fds) close(fd);

    print("quiet (measured)", quiet);
    print("with idle + slow connections (measured)", loaded);
    const double ratio = percentile(loaded.rtt_us, 0.99) / percentile(quiet.rtt_us, 0.99);
    std::printf("  connections open at the end of the loaded run: %zu; slow clients reconnected %d times; "
                "refused %llu, timeouts %llu\n",
                open_during, reconnects, static_cast<unsigned long long>(http.transport_counters().connections_refused.load()),
                static_cast<unsigned long long>(http.transport_counters().timeouts.load()));
    std::printf("  p99 loaded / quiet = %.2fx (target <= 2x): %s; lost %d (target 0): %s\n", ratio,
                ratio <= 2.0 ? "MET" : "NOT MET", quiet.lost + loaded.lost, quiet.lost + loaded.lost == 0 ? "MET" : "NOT MET");
    std::printf("  load average after: %s\n", loadavg().c_str());
    http.stop();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_daemon_http_load: %s\n", e.what());
    return 1;
  }
}
