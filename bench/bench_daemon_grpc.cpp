// bench_daemon_grpc: requests/s of dype-serve's gRPC front end for small graphs over Triton's
// ModelStreamInfer bidirectional stream, in one process with nothing mocked: the real EngineService
// (emulated paper testbed by default), the real GrpcServer on 127.0.0.1 and a generated gRPC stub
// as the client. The client runs on the same cores as the server, so the figure is what the whole
// machine (2 cores here) sustains for client + server + engine. Issue 6 target: >= 3000 requests/s
// for 64-node graphs.
//
// Variants: whole graph in every request (x + edge_index) and a graph registered once (x +
// parameters.graph_id, as dype-client streams). Each stream has a writer and a reader thread and
// at most --inflight requests unanswered; the server keeps up to 8 of a stream in its pipeline.
// Every response is checked (no error, the right id, [64, hidden] output) and counted exactly once.
//
//   bench_daemon_grpc [--nodes 64] [--edges 256] [--requests 20000] [--streams 1,2,4] [--inflight 16]
//                     [--system configs/systems/paper-testbed-pcie4.yaml] [--batch 64/500]
//
// With --batch SPEC (dype-serve's --batch syntax), only the registered-graph variant runs, at each
// stream count, against two gRPC servers on the same engine: one without and one with dynamic
// batching. Printed for both: requests/s (measured host time) and the modelled device-side
// requests/s of the plan the engine runs (mean batch size / the plan's modelled period), and the
// ratios. Issue 19 target: >= 2x at 64 streams.
// Times are measured on this CPU (wall clock); CPU use is the process's user+system time.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <semaphore>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "kernels/graph/generators.h"
#include "runtime/daemon/batching_service.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc_server.h"
#include "runtime/daemon/http_server.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"

using namespace dype;
using namespace dype::rt::daemon;
using Clock = std::chrono::steady_clock;

namespace {

std::string arg(int argc, char** argv, const std::string& key, const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == key) return argv[i + 1];
  return def;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void add_input(inference::ModelInferRequest& r, const char* name, const char* dt, std::vector<std::int64_t> shape,
               const void* data, std::size_t bytes) {
  auto* t = r.add_inputs();
  t->set_name(name);
  t->set_datatype(dt);
  for (std::int64_t d : shape) t->add_shape(d);
  r.add_raw_input_contents(std::string(static_cast<const char*>(data), bytes));
}

struct Result {
  double wall_s = 0.0;
  double cpu_s = 0.0;
  std::vector<double> latency_us;
  int errors = 0;
};

// `streams` streams, `total` requests split between them; returns when every answer is in.
// Each stream keeps at most `inflight` requests unanswered, so latencies are those of a loaded
// server rather than of a queue growing at the client.
Result run(inference::GRPCInferenceService::Stub& stub, const inference::ModelInferRequest& proto, int total,
           int streams, int inflight, std::int64_t rows, std::int64_t cols) {
  Result res;
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(streams));
  std::atomic<int> errors{0};
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::vector<std::thread> readers;
  for (int s = 0; s < streams; ++s) {
    readers.emplace_back([&, s] {
      const int n = total / streams + (s < total % streams ? 1 : 0);
      // Send times (ns since t0), written by the writer, read by this thread after the answer.
      std::unique_ptr<std::atomic<std::int64_t>[]> sent(new std::atomic<std::int64_t>[static_cast<std::size_t>(n)]);
      std::vector<char> answered(static_cast<std::size_t>(n), 0);
      grpc::ClientContext ctx;
      auto stream = stub.ModelStreamInfer(&ctx);
      std::counting_semaphore<> slots(inflight);
      std::thread writer([&] {
        inference::ModelInferRequest r = proto;
        for (int i = 0; i < n; ++i) {
          slots.acquire();
          r.set_id(std::to_string(i));
          sent[static_cast<std::size_t>(i)].store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
          if (!stream->Write(r)) break;
        }
        stream->WritesDone();
      });
      inference::ModelStreamInferResponse resp;
      int got = 0;
      while (stream->Read(&resp)) {
        const auto now = Clock::now();
        const auto& o = resp.infer_response();
        const int i = std::stoi(o.id());
        const bool ok = resp.error_message().empty() && i >= 0 && i < n && !answered[static_cast<std::size_t>(i)] &&
                        o.outputs_size() == 1 && o.outputs(0).shape(0) == rows && o.outputs(0).shape(1) == cols;
        if (!ok) {
          if (errors.fetch_add(1) < 5) std::fprintf(stderr, "bad response %s: %s\n", o.id().c_str(), resp.error_message().c_str());
        } else {
          answered[static_cast<std::size_t>(i)] = 1;
          const double now_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - t0).count());
          lat[static_cast<std::size_t>(s)].push_back((now_ns - static_cast<double>(sent[static_cast<std::size_t>(i)].load())) / 1e3);
        }
        ++got;
        slots.release();
      }
      writer.join();
      const grpc::Status st = stream->Finish();
      if (!st.ok() || got != n) {
        std::fprintf(stderr, "stream %d: %s, %d of %d answered\n", s, st.error_message().c_str(), got, n);
        errors.fetch_add(n - got + (st.ok() ? 0 : 1));
      }
    });
  }
  for (auto& t : readers) t.join();
  res.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  res.cpu_s = cpu_seconds() - cpu0;
  for (auto& l : lat) res.latency_us.insert(res.latency_us.end(), l.begin(), l.end());
  res.errors = errors.load();
  return res;
}

// The emulated devices' modelled clock for `model`: the latest modelled completion (modelled).
double modelled_clock_s(EngineService& service, const std::string& model) {
  return service.engine(model).stats().modelled_makespan_s;
}

// Batching off against on, on one engine: two gRPC front ends, the second behind BatchingService.
void compare_batching(EngineService& service, GraphRegistry& graphs, Metrics& metrics, AdmissionControl& admission,
                      const inference::ModelInferRequest& proto, const std::string& spec, int total,
                      const std::vector<int>& stream_counts, int inflight, std::int64_t rows, std::int64_t cols) {
  auto [name, policy] = parse_batch_spec(spec);
  BatchingService batched(service, {{name, policy}});
  GrpcServer plain_server(service, graphs, metrics, admission, "127.0.0.1", 0);
  GrpcServer batched_server(batched, graphs, metrics, admission, "127.0.0.1", 0);
  plain_server.start();
  batched_server.start();
  auto stub_for = [](const GrpcServer& s) {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(s.port()), grpc::InsecureChannelCredentials()));
  };
  auto plain = stub_for(plain_server), with = stub_for(batched_server);
  std::printf("\ndynamic batching %s (max %d requests, %.0f us delay), registered %lld-node graphs:\n", spec.c_str(),
              policy.max_size, policy.max_queue_delay_us, static_cast<long long>(rows));
  for (int streams : stream_counts) {
    // Modelled requests/s: requests answered over the modelled clock's advance during the run.
    run(*plain, proto, std::max(200, total / 20), streams, inflight, rows, cols);  // warm-up: plan for this size
    const double off_c0 = modelled_clock_s(service, "gcn");
    const Result off = run(*plain, proto, total, streams, inflight, rows, cols);
    const double off_period = (modelled_clock_s(service, "gcn") - off_c0) / total;
    run(*with, proto, std::max(200, total / 20), streams, inflight, rows, cols);  // warm-up: plan for batches
    const auto [b0, r0] = batched.counts("gcn");
    const double on_c0 = modelled_clock_s(service, "gcn");
    const Result on = run(*with, proto, total, streams, inflight, rows, cols);
    const auto [b1, r1] = batched.counts("gcn");
    const double mean_batch = b1 > b0 ? static_cast<double>(r1 - r0) / static_cast<double>(b1 - b0) : 1.0;
    const double on_period = (modelled_clock_s(service, "gcn") - on_c0) / total * mean_batch;
    const double off_rps = static_cast<double>(total - off.errors) / off.wall_s;
    const double on_rps = static_cast<double>(total - on.errors) / on.wall_s;
    const double off_model = 1.0 / off_period, on_model = mean_batch / on_period;
    std::printf("  %d stream(s) x %d in flight: off %7.0f req/s (measured; p50 %.0f us, p99 %.0f us, %d errors), "
                "%8.0f req/s modelled (%.1f us of modelled clock per item)\n",
                streams, inflight, off_rps, pct(off.latency_us, 0.5), pct(off.latency_us, 0.99), off.errors, off_model,
                off_period * 1e6);
    std::printf("  %*s on  %7.0f req/s (measured; p50 %.0f us, p99 %.0f us, %d errors), %8.0f req/s modelled "
                "(%.1f us per item, mean batch %.1f)\n",
                static_cast<int>(std::to_string(streams).size() + std::to_string(inflight).size() + 17), "", on_rps,
                pct(on.latency_us, 0.5), pct(on.latency_us, 0.99), on.errors, on_model, on_period * 1e6, mean_batch);
    std::printf("  %*s on / off: %.2fx measured, %.2fx modelled; target >= 2x: %s\n",
                static_cast<int>(std::to_string(streams).size() + std::to_string(inflight).size() + 17), "",
                on_rps / off_rps, on_model / off_model, on_rps / off_rps >= 2.0 ? "MET (measured)" : "NOT MET (measured)");
  }
  batched_server.stop(1.0);
  plain_server.stop(1.0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::int64_t nodes = std::stoll(arg(argc, argv, "--nodes", "64"));
    const std::int64_t edges = std::stoll(arg(argc, argv, "--edges", "256"));
    const int total = std::stoi(arg(argc, argv, "--requests", "20000"));
    const int inflight = std::stoi(arg(argc, argv, "--inflight", "16"));
    std::vector<int> stream_counts;
    {
      std::stringstream ss(arg(argc, argv, "--streams", "1,2,4"));
      for (std::string t; std::getline(ss, t, ',');) stream_counts.push_back(std::stoi(t));
    }
    EngineServiceOptions so;
    so.system_config = arg(argc, argv, "--system", std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml");
    so.mode = "perf";
    std::printf("bench_daemon_grpc: system %s, load average %s, %u hardware threads\n", so.system_config.c_str(),
                loadavg().c_str(), std::thread::hardware_concurrency());
    EngineService service(so);
    GraphRegistry graphs;
    Metrics metrics;
    ServerOptions ho;
    ho.http_port = 0;
    ho.metrics_port = -1;
    ho.threads = 4;
    HttpServer http(service, graphs, metrics, ho);  // owns the admission queue gRPC shares
    http.start();
    GrpcServer grpc_server(service, graphs, metrics, http.admission(), "127.0.0.1", 0);
    grpc_server.start();
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_server.port()), grpc::InsecureChannelCredentials()));

    const rt::ModelSpec& spec = service.model("gcn").model->spec();
    const kernels::EdgeList el = kernels::generate_uniform(nodes, edges, 3);
    const std::vector<float> x = kernels::generate_features(nodes, spec.in_features, 3);
    std::vector<std::int64_t> ei = el.src;
    ei.insert(ei.end(), el.dst.begin(), el.dst.end());
    const std::string gid = graphs.add(el);

    inference::ModelInferRequest whole, by_id;
    for (auto* r : {&whole, &by_id}) {
      r->set_model_name("gcn");
      add_input(*r, "x", "FP32", {nodes, spec.in_features}, x.data(), x.size() * sizeof(float));
    }
    add_input(whole, "edge_index", "INT64", {2, el.num_edges()}, ei.data(), ei.size() * sizeof(std::int64_t));
    (*by_id.mutable_parameters())["graph_id"].set_string_param(gid);

    const std::string batch = arg(argc, argv, "--batch", "");
    if (!batch.empty()) {
      compare_batching(service, graphs, metrics, http.admission(), by_id, batch, total, stream_counts, inflight, nodes,
                       spec.hidden);
      std::printf("\nload average after: %s\n", loadavg().c_str());
      grpc_server.stop(1.0);
      http.stop();
      return 0;
    }
    struct Variant {
      const char* name;
      const inference::ModelInferRequest* proto;
    };
    for (const Variant& v : {Variant{"whole graph per request (x + edge_index)", &whole},
                             Variant{"registered graph (x + parameters.graph_id)", &by_id}}) {
      std::printf("\n%s: gcn (%lld features, hidden %lld), %lld nodes, %lld edges, %zu request bytes\n", v.name,
                  static_cast<long long>(spec.in_features), static_cast<long long>(spec.hidden),
                  static_cast<long long>(nodes), static_cast<long long>(el.num_edges()), v.proto->ByteSizeLong());
      run(*stub, *v.proto, std::max(200, total / 20), 1, inflight, nodes, spec.hidden);  // warm-up: re-plan for this size
      for (int streams : stream_counts) {
        const Result r = run(*stub, *v.proto, total, streams, inflight, nodes, spec.hidden);
        const double rps = static_cast<double>(total - r.errors) / r.wall_s;
        std::printf("  %d stream(s): %7.0f requests/s (measured, %d requests in %.2f s, %d errors), CPU %.2f cores, "
                    "latency p50 %.0f us p99 %.0f us; target >= 3000/s: %s (%.2fx)\n",
                    streams, rps, total, r.wall_s, r.errors, r.cpu_s / r.wall_s, pct(r.latency_us, 0.5),
                    pct(r.latency_us, 0.99), rps >= 3000.0 ? "MET" : "NOT MET", rps / 3000.0);
      }
    }
    std::printf("\nload average after: %s\n", loadavg().c_str());
    grpc_server.stop(1.0);
    http.stop();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_daemon_grpc: %s\n", e.what());
    return 1;
  }
}
