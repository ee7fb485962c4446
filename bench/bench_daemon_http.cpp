// bench_daemon_http: dype-serve's HTTP front end end to end in one process, nothing mocked: the
// real EngineService (emulated paper testbed by default), the real HttpServer on 127.0.0.1
// (ephemeral port) and a cpp-httplib client on one keep-alive connection, binary tensors both ways.
//
//   overhead  1k-node GCN requests. Protocol overhead per request = server time - engine time, both
//             measured by the server and returned as response parameters (dype_server_time_us:
//             from httplib handing over the parsed request line and headers, i.e. routing and the
//             body read included, to the response header encoded -- the output's bytes are then
//             sent from the engine's answer as they lie; dype_engine_time_us: submit to answer;
//             phases dype_receive_us, dype_queue_us, dype_parse_us, dype_build_us), and, as an upper bound
//             including the client and the loopback socket,
//             client round trip - engine time; and the handler thread's CPU time per request
//             (dype_server_cpu_us), which waiting for a core on a loaded machine does not inflate.
//             Issue 6 target: median <= 100 us.
//   large     one ~100 MB request (x FP32 [N, 256] + edge_index), to a GCN with 256 input features
//             and 16 hidden so the payload, not the activations, dominates memory. Peak RSS growth
//             of the whole request vs the payload, minus the engine's own peak growth for the same
//             request run in process; and every allocation >= 1 MiB made during the request, by
//             thread (the HTTP handler's thread is identified), which is where payload copies land.
//
//   bench_daemon_http [--only overhead|large] [--requests 2000] [--nodes 1000] [--edges 10000]
//                     [--large-mb 100] [--system configs/systems/paper-testbed-pcie4.yaml] [--json FILE]
// --json: the overhead section's medians and p99s per variant also as JSON (bench/run_all.sh).
// All times are measured on this CPU (wall clock); emulated devices compute on the CPU too.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>
#include <sys/syscall.h>

#include "graph/generators.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/kserve/request_builder.h"
#include "runtime/host_memory.h"
#include "runtime/daemon/kserve/tensor.h"
#include "bench/bench_common.h"

// After the project headers: httplib pulls in <resolv.h>, whose _res macro breaks Eigen headers
// parsed after it.
#include <httplib.h>

using namespace dype;
using namespace dype::rt::daemon;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- allocation trace: every operator new >= 1 MiB while tracing is on -------------------------
namespace {

using bench::arg;
using bench::loadavg;
struct BigAlloc {
  std::size_t bytes;
  long tid;
};
constexpr std::size_t kTraceMin = 1u << 20;
std::atomic<bool> g_trace{false};
std::atomic<std::size_t> g_trace_n{0};
BigAlloc g_trace_buf[4096];

long this_tid() { return static_cast<long>(syscall(SYS_gettid)); }

void note(std::size_t n) {
  if (n >= kTraceMin && g_trace.load(std::memory_order_relaxed)) {
    const std::size_t i = g_trace_n.fetch_add(1);
    if (i < std::size(g_trace_buf)) g_trace_buf[i] = {n, this_tid()};
  }
}
void* checked(void* p) {
  if (!p) throw std::bad_alloc();
  return p;
}
void* aligned(std::size_t n, std::align_val_t a) {
  const std::size_t al = static_cast<std::size_t>(a);
  return checked(std::aligned_alloc(al, (n + al - 1) / al * al));
}
}  // namespace

// libstdc++'s operator delete (plain and aligned) releases with free(), which matches malloc and
// aligned_alloc here, so only the allocating side is replaced. Not inlined: GCC would otherwise see
// malloc paired with operator delete at call sites (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t n) { note(n); return checked(std::malloc(n ? n : 1)); }
[[gnu::noinline]] void* operator new[](std::size_t n) { note(n); return checked(std::malloc(n ? n : 1)); }
[[gnu::noinline]] void* operator new(std::size_t n, std::align_val_t a) { note(n); return aligned(n, a); }
[[gnu::noinline]] void* operator new[](std::size_t n, std::align_val_t a) { note(n); return aligned(n, a); }

namespace {

// kB fields of /proc/self/status.
long status_kb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}
// Resets VmHWM to the current RSS (Linux >= 4.0), so a later VmHWM is the peak of what follows.
bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::vector<std::int64_t> edge_index_of(const kernels::EdgeList& el) {
  std::vector<std::int64_t> ei = el.src;
  ei.insert(ei.end(), el.dst.begin(), el.dst.end());
  return ei;
}

// Passes every call to the real service; notes which thread submits (the HTTP handler's).
class TaggingService final : public InferenceService {
 public:
  explicit TaggingService(InferenceService& real) : real_(real) {}
  std::vector<ModelInfo> models() const override { return real_.models(); }
  ModelInfo model(const std::string& n) const override { return real_.model(n); }
  bool model_ready(const std::string& n) const override { return real_.model_ready(n); }
  std::future<rt::HostTensor> infer(const std::string& m, rt::Request r, std::int64_t* version) override {
    handler_tid.store(this_tid());
    return real_.infer(m, std::move(r), version);
  }
  bool try_infer(const std::string& m, rt::Request& r, std::int64_t* version, InferDone& done) override {
    handler_tid.store(this_tid());
    return real_.try_infer(m, r, version, done);
  }
  json plan(const std::string& m) const override { return real_.plan(m); }
  void set_mode(const std::string& m) override { real_.set_mode(m); }
  std::string mode() const override { return real_.mode(); }
  std::string metrics_text() const override { return real_.metrics_text(); }
  void drain() override { real_.drain(); }
  std::atomic<long> handler_tid{0};

 private:
  InferenceService& real_;
};

struct Posted {
  httplib::Result res;
  double client_us;
};

// The body is streamed from `b` (httplib's Post(..., std::string body, ...) would copy it into its
// request first, which the large case would count as payload copies).
Posted post(httplib::Client& c, const std::string& model, const EncodedBody& b) {
  httplib::Headers h{{"Inference-Header-Content-Length", std::to_string(*b.header_length)}};
  const std::string& body = b.body;
  const auto t0 = Clock::now();
  httplib::Result r = c.Post(("/v2/models/" + model + "/infer").c_str(), h, body.size(),
                             [&body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                               return sink.write(body.data() + offset, std::min<std::size_t>(length, 1u << 20));
                             },
                             "application/octet-stream");
  return {std::move(r), std::chrono::duration<double, std::micro>(Clock::now() - t0).count()};
}

InferResponse response_of(const httplib::Result& r) {
  if (!r) throw Error("no response: " + httplib::to_string(r.error()));
  if (r->status != 200) throw Error("HTTP " + std::to_string(r->status) + ": " + r->body);
  std::optional<std::size_t> hl;
  if (r->has_header("Inference-Header-Content-Length")) hl = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  return parse_infer_response(r->body, hl);
}

void overhead(InferenceService& service, HttpServer& http, GraphRegistry& graphs, int requests, std::int64_t nodes,
              std::int64_t edges, json& out) {
  const std::int64_t f = service.model("gcn").model->spec().in_features;
  const kernels::EdgeList el = kernels::generate_uniform(nodes, edges, 7);
  const Tensor x = Tensor::from_f32("x", {nodes, f}, kernels::generate_features(nodes, f, 7));
  const Tensor ei = Tensor::from_i64("edge_index", {2, el.num_edges()}, edge_index_of(el));
  const std::string gid = graphs.add(el);
  httplib::Client c("127.0.0.1", http.http_port());
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);  // as curl does by default
  c.set_read_timeout(120, 0);

  struct Variant {
    const char* name;
    const char* key;  // in --json
    EncodedBody body;
  };
  std::vector<Variant> variants;
  variants.push_back({"whole graph per request (x + edge_index)", "whole_graph",
                      encode_infer_request("", {x, ei}, {}, true, true)});
  variants.push_back({"registered graph (x + parameters.graph_id)", "registered_graph",
                      encode_infer_request("", {x}, {{"graph_id", gid}}, true, true)});
  for (const Variant& v : variants) {
    std::vector<double> client, server, engine, over_server, over_client, server_cpu, receive, queue, parse, build, rest;
    const int warmup = std::max(50, requests / 10);
    for (int i = 0; i < warmup + requests; ++i) {
      const Posted p = post(c, "gcn", v.body);
      const InferResponse r = response_of(p.res);
      if (r.outputs.at(0).shape.at(0) != nodes) throw Error("wrong output rows");
      if (i < warmup) continue;  // re-plans for the request size happen here
      const double e = r.parameters.at("dype_engine_time_us").get<double>();
      const double s = r.parameters.at("dype_server_time_us").get<double>();
      server_cpu.push_back(r.parameters.at("dype_server_cpu_us").get<double>());
      receive.push_back(r.parameters.at("dype_receive_us").get<double>());
      queue.push_back(r.parameters.at("dype_queue_us").get<double>());
      parse.push_back(r.parameters.at("dype_parse_us").get<double>());
      build.push_back(r.parameters.at("dype_build_us").get<double>());
      rest.push_back(s - e - receive.back() - queue.back() - parse.back() - build.back());
      client.push_back(p.client_us);
      server.push_back(s);
      engine.push_back(e);
      over_server.push_back(s - e);
      over_client.push_back(p.client_us - e);
    }
    std::printf("\n[overhead] %s: %lld nodes, %lld edges, %lld features; request %zu bytes, %d requests after %d warm-up\n",
                v.name, static_cast<long long>(nodes), static_cast<long long>(el.num_edges()),
                static_cast<long long>(f), v.body.body.size(), requests, warmup);
    auto row = [](const char* what, const std::vector<double>& a) {
      std::printf("  %-44s median %8.1f us   p10 %8.1f   p90 %8.1f   p99 %8.1f\n", what, pct(a, 0.5), pct(a, 0.1),
                  pct(a, 0.9), pct(a, 0.99));
    };
    row("client round trip (measured)", client);
    row("server time (measured, in response)", server);
    row("engine time (measured, in response)", engine);
    row("overhead = server - engine", over_server);
    row("overhead incl. client+socket = rtt - engine", over_client);
    row("handler-thread CPU (measured, in response)", server_cpu);
    std::printf("  phases of server - engine (measured, in response):\n");
    row("  receive (body read)", receive);
    row("  queue (body read -> handler starts)", queue);
    row("  parse (admission, JSON header, tensor views)", parse);
    row("  build (x copy + checks, graph normalisation)", build);
    row("  rest (routing, output header encoding)", rest);
    std::printf("  target <= 100 us median: server - engine %.1f us -> %s (%.2fx of target); rtt - engine %.1f us -> %s;\n"
                "  handler-thread CPU %.1f us -> %s (CPU time does not count waiting for a core on a loaded machine)\n",
                pct(over_server, 0.5), pct(over_server, 0.5) <= 100.0 ? "MET" : "NOT MET", pct(over_server, 0.5) / 100.0,
                pct(over_client, 0.5), pct(over_client, 0.5) <= 100.0 ? "MET" : "NOT MET", pct(server_cpu, 0.5),
                pct(server_cpu, 0.5) <= 100.0 ? "MET" : "NOT MET");
    out[v.key] = {{"nodes", nodes}, {"edges", el.num_edges()}, {"features", f}, {"requests", requests},
                  {"request_bytes", v.body.body.size()},
                  {"client_rtt_us_median", pct(client, 0.5)}, {"client_rtt_us_p99", pct(client, 0.99)},
                  {"server_us_median", pct(server, 0.5)}, {"engine_us_median", pct(engine, 0.5)},
                  {"overhead_us_median", pct(over_server, 0.5)}, {"overhead_us_p99", pct(over_server, 0.99)},
                  {"rtt_minus_engine_us_median", pct(over_client, 0.5)},
                  {"server_cpu_us_median", pct(server_cpu, 0.5)}, {"target_overhead_us", 100.0}};
  }
  out["load_average_after"] = loadavg();
  std::printf("  load average after: %s\n", loadavg().c_str());
}

void large(EngineService& service, TaggingService& tagging, HttpServer& http, GraphRegistry& graphs, double mb) {
  const std::int64_t f = service.model("gcn-wide").model->spec().in_features;
  const auto nodes = static_cast<std::int64_t>(mb * 1e6 / static_cast<double>(f * 4));
  const kernels::EdgeList el = kernels::generate_uniform(nodes, 2 * nodes, 11);
  EncodedBody body;
  std::size_t x_bytes = 0;
  {
    const Tensor x = Tensor::from_f32("x", {nodes, f}, kernels::generate_features(nodes, f, 11));
    x_bytes = x.raw.size();
    body = encode_infer_request("", {x, Tensor::from_i64("edge_index", {2, el.num_edges()}, edge_index_of(el))}, {},
                                true, true);
  }
  const double payload_mb = static_cast<double>(body.body.size()) / 1e6;
  std::printf("\n[large] one request of %.1f MB: x FP32 [%lld, %lld] (%.1f MB) + edge_index INT64 [2, %lld]; model gcn-wide\n",
              payload_mb, static_cast<long long>(nodes), static_cast<long long>(f), static_cast<double>(x_bytes) / 1e6,
              static_cast<long long>(el.num_edges()));
  if (!reset_peak()) std::printf("  (cannot reset VmHWM: peak figures below are since start)\n");

  // 1. The engine alone, in process, on the same request (inputs built before the baseline).
  double engine_growth_mb = 0.0;
  {
    const InferRequest in = parse_infer_request(body.body, body.header_length);
    rt::Request req = build_request(*service.model("gcn-wide").model, in, graphs);
    reset_peak();
    const long base = status_kb("VmRSS");
    const auto t0 = Clock::now();
    rt::HostTensor y = service.infer("gcn-wide", std::move(req)).get();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    engine_growth_mb = static_cast<double>(status_kb("VmHWM") - base) / 1e3;
    std::printf("  engine alone (in process): %.2f s, peak RSS growth %.1f MB (activations, graph copies, output)\n", s,
                engine_growth_mb);
  }

  // 2. The same request over HTTP (the client's body is built before the baseline).
  httplib::Client c("127.0.0.1", http.http_port());
  c.set_read_timeout(600, 0);
  reset_peak();
  const long base = status_kb("VmRSS");
  g_trace_n = 0;
  g_trace = true;
  const Posted p = post(c, "gcn-wide", body);
  g_trace = false;
  const long peak = status_kb("VmHWM");
  const InferResponse r = response_of(p.res);
  if (r.outputs.at(0).shape.at(0) != nodes) throw Error("wrong output rows");
  const double growth_mb = static_cast<double>(peak - base) / 1e3;
  const double front_mb = growth_mb - engine_growth_mb;
  std::printf("  over HTTP: %.2f s round trip (measured), engine %.0f us, server %.0f us (in response)\n",
              p.client_us / 1e6, r.parameters.at("dype_engine_time_us").get<double>(),
              r.parameters.at("dype_server_time_us").get<double>());
  std::printf("  peak RSS growth of the whole request: %.1f MB = %.2f x payload (measured)\n", growth_mb, growth_mb / payload_mb);
  std::printf("  minus the engine's own growth: %.1f MB = %.2f x payload -- the receive buffer (1 x) plus the one copy of\n"
              "  x into the engine's input tensor (%.2f x) would be %.2f x; more means more copies\n",
              front_mb, front_mb / payload_mb, static_cast<double>(x_bytes) / 1e6 / payload_mb,
              1.0 + static_cast<double>(x_bytes) / 1e6 / payload_mb);

  const long handler = tagging.handler_tid.load();
  const long client_tid = this_tid();
  std::map<long, int> names;
  std::printf("  allocations >= 1 MiB during the request (operator new; measured), in order:\n");
  const std::size_t n = std::min(g_trace_n.load(), std::size(g_trace_buf));
  double handler_mb = 0.0;
  int handler_payload_sized = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const BigAlloc& a = g_trace_buf[i];
    const char* who = a.tid == handler ? "http handler" : a.tid == client_tid ? "client" : "engine/other";
    const double amb = static_cast<double>(a.bytes) / 1e6;
    if (a.tid == handler) {
      handler_mb += amb;
      if (amb >= 0.5 * static_cast<double>(x_bytes) / 1e6) ++handler_payload_sized;
    }
    std::printf("    %9.2f MB  %s (tid %ld)\n", amb, who, a.tid);
  }
  std::printf("  http handler thread: %d payload-sized allocations (receive buffer + copies), %.1f MB in all\n",
              handler_payload_sized, handler_mb);
  std::printf("  load average after: %s\n", loadavg().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string only = arg(argc, argv, "--only", "");
    const int requests = std::stoi(arg(argc, argv, "--requests", "2000"));
    const std::int64_t nodes = std::stoll(arg(argc, argv, "--nodes", "1000"));
    const std::int64_t edges = std::stoll(arg(argc, argv, "--edges", "10000"));
    const double large_mb = std::stod(arg(argc, argv, "--large-mb", "100"));
    const std::string json_path = arg(argc, argv, "--json", "");
    rt::retain_freed_host_memory();  // as dype-serve does
    EngineServiceOptions so;
    so.system_config = arg(argc, argv, "--system", std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml");
    so.mode = "perf";
    so.models = default_models();
    rt::ModelSpec wide{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 256, .hidden = 16};
    so.models.push_back({"gcn-wide", wide, {.nodes = 100000, .nnz = 300000, .feature_len = 256, .degree_skew = 1.0}});
    std::printf("bench_daemon_http: system %s, load average %s, %u hardware threads\n", so.system_config.c_str(),
                loadavg().c_str(), std::thread::hardware_concurrency());
    EngineService service(so);
    TaggingService tagging(service);
    GraphRegistry graphs;
    Metrics metrics;
    ServerOptions ho;
    ho.http_port = 0;
    ho.metrics_port = -1;
    ho.max_request_bytes = 1u << 30;
    HttpServer http(tagging, graphs, metrics, ho);
    http.start();
    json out = json::object();
    if (only.empty() || only == "overhead") overhead(tagging, http, graphs, requests, nodes, edges, out["overhead"]);
    if (only.empty() || only == "large") large(service, tagging, http, graphs, large_mb);
    http.stop();
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << out.dump(2) << "\n";
      if (!f) throw Error("cannot write " + json_path);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_daemon_http: %s\n", e.what());
    return 1;
  }
}
