// bench_daemon_http_tls: what TLS costs dype-serve's HTTP front end, in one process, nothing
// mocked: the real EngineService (emulated paper testbed) behind two real HttpServers on
// 127.0.0.1, one plain and one HTTPS (ServerOptions::tls, TLS 1.2+; the client negotiates TLS 1.3),
// each with a cpp-httplib client on one keep-alive connection. Requests infer a 1k-node GCN on a
// registered graph (x + parameters.graph_id, binary tensors both ways). Rounds alternate plain and
// TLS so a change in the machine's load falls on both alike; reported: the client round trip's
// median, p10 and p90 for each, the ratio of medians, and a new connection's cost (TCP connect +
// handshake + one small GET) for each.
//
//   bench_daemon_http_tls [--requests 2000] [--rounds 10] [--nodes 1000] [--edges 10000]
//                         [--tls-cert FILE --tls-key FILE]   (default: made with the openssl CLI)
// All times are wall clock on this machine; emulated devices compute on the CPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "graph/generators.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/kserve/tensor.h"
#include "runtime/daemon/http/tls.h"
#include "runtime/host_memory.h"
#include "bench/bench_common.h"

// After the project headers: httplib pulls in <resolv.h>, whose _res macro breaks Eigen headers.
#include <httplib.h>

using namespace dype;
using namespace dype::rt::daemon;
using Clock = std::chrono::steady_clock;

namespace {

using bench::arg;
using bench::loadavg;
using bench::percentile;

// A self-signed certificate for 127.0.0.1 (EC P-256) in a temp folder; its paths.
std::pair<std::string, std::string> make_certificate() {
  const auto dir = std::filesystem::temp_directory_path() / ("bench_tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string d = dir.string();
  const std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj "
                          "/CN=localhost -addext subjectAltName=IP:127.0.0.1 -keyout '" + d + "/key.pem' -out '" + d +
                          "/cert.pem' > '" + d + "/openssl.log' 2>&1";
  if (std::system(cmd.c_str()) != 0) throw Error("openssl could not make a certificate (see " + d + "/openssl.log)");
  return {d + "/cert.pem", d + "/key.pem"};
}

struct Side {
  const char* name;
  std::unique_ptr<httplib::Client> client;
  std::vector<double> rtt_us, connect_us, receive_us, engine_us, outside_us;
};

// One request: the client round trip, and the server's own figures from the response (body
// receive, engine time, and the round trip minus the server time: client, sockets, response write).
struct Timed {
  double rtt_us, receive_us, engine_us, outside_us;
};

Timed post(httplib::Client& c, const EncodedBody& b, std::int64_t nodes) {
  const httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(*b.header_length)}};
  const auto t0 = Clock::now();
  auto r = c.Post("/v2/models/gcn/infer", h, b.body, "application/octet-stream");
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (!r) throw Error("no response: " + httplib::to_string(r.error()));
  if (r->status != 200) throw Error("HTTP " + std::to_string(r->status) + ": " + r->body);
  std::optional<std::size_t> hl;
  if (r->has_header("Inference-Header-Content-Length"))
    hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  const InferResponse res = parse_infer_response(r->body, hl);
  if (res.outputs.at(0).shape.at(0) != nodes) throw Error("wrong output rows");
  return {us, res.parameters.at("dype_receive_us").get<double>(), res.parameters.at("dype_engine_time_us").get<double>(),
          us - res.parameters.at("dype_server_time_us").get<double>()};
}

std::unique_ptr<httplib::Client> client_for(int port, const std::string& ca) {
  std::unique_ptr<httplib::Client> c;
  if (ca.empty()) {
    c = std::make_unique<httplib::Client>("127.0.0.1", port);
  } else {
    c = std::make_unique<httplib::Client>("https://127.0.0.1:" + std::to_string(port));
    c->set_ca_cert_path(ca);
    c->enable_server_certificate_verification(true);
  }
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_read_timeout(120, 0);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int requests = std::stoi(arg(argc, argv, "--requests", "2000"));
    const int rounds = std::max(1, std::stoi(arg(argc, argv, "--rounds", "10")));
    const std::int64_t nodes = std::stoll(arg(argc, argv, "--nodes", "1000"));
    const std::int64_t edges = std::stoll(arg(argc, argv, "--edges", "10000"));
    std::string cert = arg(argc, argv, "--tls-cert", ""), key = arg(argc, argv, "--tls-key", "");
    if (cert.empty()) std::tie(cert, key) = make_certificate();
    rt::retain_freed_host_memory();  // as dype-serve does
    EngineServiceOptions so;
    so.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
    so.mode = "perf";
    so.models = default_models();
    std::printf("bench_daemon_http_tls: load average %s, %u hardware threads\n", loadavg().c_str(),
                std::thread::hardware_concurrency());
    EngineService service(so);
    GraphRegistry graphs;
    Metrics metrics;
    ServerOptions ho;
    ho.http_port = 0;
    ho.metrics_port = -1;
    HttpServer plain(service, graphs, metrics, ho);
    ho.tls = load_tls_identity(cert, key);
    HttpServer tls(service, graphs, metrics, ho);
    plain.start();
    tls.start();

    const std::int64_t f = service.model("gcn").model->spec().in_features;
    const kernels::EdgeList el = kernels::generate_uniform(nodes, edges, 7);
    const std::string gid = graphs.add(el);
    const EncodedBody body = encode_infer_request(
        "", {Tensor::from_f32("x", {nodes, f}, kernels::generate_features(nodes, f, 7))}, {{"graph_id", gid}}, true, true);
    Side sides[2] = {{"plain HTTP", client_for(plain.http_port(), ""), {}, {}, {}, {}, {}},
                     {"HTTPS (TLS)", client_for(tls.http_port(), cert), {}, {}, {}, {}, {}}};
    const int warmup = std::max(50, requests / 10);
    for (Side& s : sides)
      for (int i = 0; i < warmup; ++i) post(*s.client, body, nodes);  // re-plans for the size happen here
    const int per_round = std::max(1, requests / rounds);
    for (int r = 0; r < rounds; ++r) {
      for (Side& s : sides) {
        for (int i = 0; i < per_round; ++i) {
          const Timed t = post(*s.client, body, nodes);
          s.rtt_us.push_back(t.rtt_us);
          s.receive_us.push_back(t.receive_us);
          s.engine_us.push_back(t.engine_us);
          s.outside_us.push_back(t.outside_us);
        }
        // A new connection: connect, handshake (TLS), one small GET.
        for (int i = 0; i < 10; ++i) {
          auto fresh = client_for(&s == &sides[0] ? plain.http_port() : tls.http_port(), &s == &sides[0] ? "" : cert);
          const auto t0 = Clock::now();
          auto g = fresh->Get("/v2/health/live");
          if (!g || g->status != 200) throw Error(std::string(s.name) + ": a new connection's GET failed");
          s.connect_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      }
    }
    std::printf("\n1k-node GCN on a registered graph (%lld nodes, %lld edges, %lld features; request %zu bytes), "
                "%d requests each on one keep-alive connection, %d alternating rounds, after %d warm-up\n",
                static_cast<long long>(nodes), static_cast<long long>(el.num_edges()), static_cast<long long>(f),
                body.body.size(), per_round * rounds, rounds, warmup);
    for (const Side& s : sides) {
      std::printf("  %-12s infer round trip median %8.1f us   p10 %8.1f   p90 %8.1f   | new connection + GET median %8.1f us\n",
                  s.name, percentile(s.rtt_us, 0.5), percentile(s.rtt_us, 0.1), percentile(s.rtt_us, 0.9), percentile(s.connect_us, 0.5));
      std::printf("  %-12s   medians: body receive %7.1f us, engine %7.1f us, round trip - server time (client, "
                  "sockets, response write) %7.1f us\n",
                  "", percentile(s.receive_us, 0.5), percentile(s.engine_us, 0.5), percentile(s.outside_us, 0.5));
    }
    std::printf("  TLS / plain: infer round trip median %.3fx (+%.1f us); new connection %.2fx (measured)\n",
                percentile(sides[1].rtt_us, 0.5) / percentile(sides[0].rtt_us, 0.5), percentile(sides[1].rtt_us, 0.5) - percentile(sides[0].rtt_us, 0.5),
                percentile(sides[1].connect_us, 0.5) / percentile(sides[0].connect_us, 0.5));
    std::printf("  load average after: %s\n", loadavg().c_str());
    tls.stop();
    plain.stop();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_daemon_http_tls: %s\n", e.what());
    return 1;
  }
}
