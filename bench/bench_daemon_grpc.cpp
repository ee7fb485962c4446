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
//                     [--system configs/systems/paper-testbed-pcie4.yaml] [--batch 64/500 [--rounds 1]]
//                     [--client threads|callback]
//
// With --batch SPEC (dype-serve's --batch syntax), only the registered-graph variant runs, at each
// stream count, against two gRPC servers on the same engine: one without and one with dynamic
// batching, --rounds alternating off/on pairs (each printed, then the medians). Printed for both:
// requests/s (measured host time), the host CPU per request and its share in the kernel, context
// switches per request (getrusage: client and server together), the modelled device-side
// requests/s of the plan the engine runs (mean batch size / the plan's modelled period), and the
// ratios. Issue 19 target: >= 2x at 64 streams.
// --client: the load generator. `threads` (default): gRPC's blocking API, a writer and a reader
// thread per stream (129 threads at 64 streams, each request a few thread wake-ups in the client);
// `callback`: gRPC's callback API, no thread per stream, so less of the shared cores goes to the
// client. The server is the same either way.
// Times are measured on this CPU (wall clock); CPU use is the process's user+system time.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <semaphore>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "graph/generators.h"
#include "runtime/daemon/batching_service.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/proto/grpc_service.grpc.pb.h"
#include "bench/bench_common.h"

using namespace dype;
using namespace dype::rt::daemon;
using Clock = std::chrono::steady_clock;

namespace {

using bench::arg;
using bench::loadavg;

// CPU-seconds the whole machine has been busy (every process; /proc/stat), to tell how much of
// the cores other processes took during a run.
double machine_busy_s() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  double v[8] = {};
  f >> cpu;
  for (double& x : v) f >> x;
  const double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // all but idle and iowait
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The process's CPU time (every thread, client and server) and context switches so far.
struct HostUse {
  double user_s = 0.0, sys_s = 0.0;
  long switches = 0;  // voluntary + involuntary
};
HostUse host_use() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {static_cast<double>(u.ru_utime.tv_sec) + static_cast<double>(u.ru_utime.tv_usec) / 1e6,
          static_cast<double>(u.ru_stime.tv_sec) + static_cast<double>(u.ru_stime.tv_usec) / 1e6,
          u.ru_nvcsw + u.ru_nivcsw};
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

bool g_callback_client = false;  // --client callback

struct Result {
  double wall_s = 0.0;
  double cpu_s = 0.0;
  double user_s = 0.0, sys_s = 0.0;
  long switches = 0;
  double others_cores = 0.0;  // cores other processes kept busy meanwhile (machine busy - this process)
  std::vector<double> latency_us;
  int errors = 0;
};

// One stream of the callback client: gRPC's ClientBidiReactor, no thread of its own. Each answer
// read may let the next request be written (at most `inflight` unanswered, one write at a time);
// after the last request it half-closes and reads until the server ends the stream.
class CallbackStream final : public grpc::ClientBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  CallbackStream(inference::GRPCInferenceService::Stub& stub, const inference::ModelInferRequest& proto, int n,
                 int inflight, std::int64_t rows, std::int64_t cols, std::vector<double>& latency_us, std::atomic<int>& errors)
      : req_(proto), n_(n), inflight_(inflight), rows_(rows), cols_(cols), sent_at_(static_cast<std::size_t>(n)),
        answered_(static_cast<std::size_t>(n), 0), latency_us_(latency_us), errors_(errors) {
    stub.async()->ModelStreamInfer(&ctx_, this);
    StartRead(&resp_);
    next_write();
    StartCall();
  }
  // Waits until the stream is done; the number of answers that were wrong or missing.
  int wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return bad_ + (n_ - got_) + (status_.ok() ? 0 : 1);
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) return;  // the stream is ending; OnDone says why
    }
    next_write();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    const auto now = Clock::now();
    {
      std::lock_guard lock(mu_);
      const auto& o = resp_.infer_response();
      const int i = std::atoi(o.id().c_str());
      const bool good = resp_.error_message().empty() && i >= 0 && i < sent_ && !answered_[static_cast<std::size_t>(i)] &&
                        o.outputs_size() == 1 && o.outputs(0).shape(0) == rows_ && o.outputs(0).shape(1) == cols_;
      if (!good) {
        ++bad_;
        if (errors_.fetch_add(1) < 5) std::fprintf(stderr, "bad response %s: %s\n", o.id().c_str(), resp_.error_message().c_str());
      } else {
        answered_[static_cast<std::size_t>(i)] = 1;
        latency_us_.push_back(std::chrono::duration<double, std::micro>(now - sent_at_[static_cast<std::size_t>(i)]).count());
      }
      ++got_;
    }
    StartRead(&resp_);
    next_write();
  }
  void OnDone(const grpc::Status& st) override {
    std::lock_guard lock(mu_);
    status_ = st;
    if (!st.ok() || got_ != n_) std::fprintf(stderr, "stream: %s, %d of %d answered\n", st.error_message().c_str(), got_, n_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  // Writes the next request if one may go now, or half-closes after the last one.
  void next_write() {
    std::unique_lock lock(mu_);
    if (writing_ || closed_) return;
    if (sent_ == n_) {
      closed_ = true;
      lock.unlock();
      StartWritesDone();
      return;
    }
    if (sent_ - got_ >= inflight_) return;
    writing_ = true;
    req_.set_id(std::to_string(sent_));
    sent_at_[static_cast<std::size_t>(sent_)] = Clock::now();
    ++sent_;
    lock.unlock();
    StartWrite(&req_);
  }

  grpc::ClientContext ctx_;
  inference::ModelInferRequest req_;  // changed only while no write is in progress
  inference::ModelStreamInferResponse resp_;
  const int n_, inflight_;
  const std::int64_t rows_, cols_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Clock::time_point> sent_at_;
  std::vector<char> answered_;
  std::vector<double>& latency_us_;
  std::atomic<int>& errors_;
  int sent_ = 0, got_ = 0, bad_ = 0;
  bool writing_ = false, closed_ = false, done_ = false;
  grpc::Status status_;
};

// `streams` streams, `total` requests split between them; returns when every answer is in.
// Each stream keeps at most `inflight` requests unanswered, so latencies are those of a loaded
// server rather than of a queue growing at the client. Client `threads`: a writer and a reader
// thread per stream on gRPC's blocking API; `callback`: gRPC's callback API (CallbackStream).
Result run(inference::GRPCInferenceService::Stub& stub, const inference::ModelInferRequest& proto, int total,
           int streams, int inflight, std::int64_t rows, std::int64_t cols) {
  Result res;
  if (g_callback_client) {
    std::vector<std::vector<double>> lat(static_cast<std::size_t>(streams));
    std::atomic<int> errors{0};
    const HostUse use0 = host_use();
    const double busy0 = machine_busy_s();
    const auto t0 = Clock::now();
    std::vector<std::unique_ptr<CallbackStream>> all;
    for (int s = 0; s < streams; ++s)
      all.push_back(std::make_unique<CallbackStream>(stub, proto, total / streams + (s < total % streams ? 1 : 0),
                                                     inflight, rows, cols, lat[static_cast<std::size_t>(s)], errors));
    int wrong = 0;
    for (auto& c : all) wrong += c->wait();
    res.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const HostUse use1 = host_use();
    res.user_s = use1.user_s - use0.user_s;
    res.sys_s = use1.sys_s - use0.sys_s;
    res.cpu_s = res.user_s + res.sys_s;
    res.switches = use1.switches - use0.switches;
    res.others_cores = std::max(0.0, (machine_busy_s() - busy0 - res.cpu_s) / res.wall_s);
    for (auto& l : lat) res.latency_us.insert(res.latency_us.end(), l.begin(), l.end());
    res.errors = wrong;
    return res;
  }
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(streams));
  std::atomic<int> errors{0};
  const HostUse use0 = host_use();
  const double busy0 = machine_busy_s();
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
  const HostUse use1 = host_use();
  res.user_s = use1.user_s - use0.user_s;
  res.sys_s = use1.sys_s - use0.sys_s;
  res.cpu_s = res.user_s + res.sys_s;
  res.switches = use1.switches - use0.switches;
  res.others_cores = std::max(0.0, (machine_busy_s() - busy0 - res.cpu_s) / res.wall_s);
  for (auto& l : lat) res.latency_us.insert(res.latency_us.end(), l.begin(), l.end());
  res.errors = errors.load();
  return res;
}

// The emulated devices' modelled clock for `model`: the latest modelled completion (modelled).
double modelled_clock_s(EngineService& service, const std::string& model) {
  return service.engine(model).stats().modelled_makespan_s;
}

// One side of the batching comparison in one round: measured host figures and the modelled ones.
struct Side {
  double rps = 0.0;            // measured: requests answered / wall time
  double cpu_us = 0.0;         // measured: process CPU (client + server) per request
  double sys_share = 0.0;      // measured: share of that CPU in the kernel
  double switches = 0.0;       // measured: context switches per request
  double others_cores = 0.0;   // measured: cores other processes kept busy during the run
  double p50_us = 0.0, p99_us = 0.0;
  int errors = 0;
  double model_rps = 0.0;      // modelled: requests per second of the emulated devices' clock
  double model_item_us = 0.0;  // modelled clock per pipeline item (a batch, or one request)
  double mean_batch = 1.0;
};

Side side_of(const Result& r, int total, double modelled_s, double mean_batch) {
  Side s;
  const double answered = static_cast<double>(total - r.errors);
  s.rps = answered / r.wall_s;
  s.cpu_us = r.cpu_s / answered * 1e6;
  s.sys_share = r.cpu_s > 0.0 ? r.sys_s / r.cpu_s : 0.0;
  s.switches = static_cast<double>(r.switches) / answered;
  s.others_cores = r.others_cores;
  s.p50_us = pct(r.latency_us, 0.5);
  s.p99_us = pct(r.latency_us, 0.99);
  s.errors = r.errors;
  s.mean_batch = mean_batch;
  s.model_item_us = modelled_s / total * mean_batch * 1e6;
  s.model_rps = mean_batch / (s.model_item_us / 1e6);
  return s;
}

void print_side(const char* label, const Side& s) {
  std::printf("    %-3s %7.0f req/s measured (host CPU %.0f us/req, %.0f%% kernel, %.1f context switches/req; "
              "p50 %.0f us, p99 %.0f us; %d errors; other processes %.2f cores) | %8.0f req/s modelled (%.1f us of "
              "device clock per item, mean batch %.1f)\n",
              label, s.rps, s.cpu_us, 100.0 * s.sys_share, s.switches, s.p50_us, s.p99_us, s.errors, s.others_cores,
              s.model_rps, s.model_item_us, s.mean_batch);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Batching off against on, on one engine: two gRPC front ends, the second behind BatchingService.
// `rounds` alternating off/on pairs per stream count; each pair printed, then the medians.
void compare_batching(EngineService& service, GraphRegistry& graphs, Metrics& metrics, AdmissionControl& admission,
                      const inference::ModelInferRequest& proto, const std::string& spec, int total,
                      const std::vector<int>& stream_counts, int inflight, int rounds, std::int64_t rows,
                      std::int64_t cols) {
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
  std::printf("\ndynamic batching %s (max %d requests, %.0f us delay), registered %lld-node graphs, %d round(s):\n",
              spec.c_str(), policy.max_size, policy.max_queue_delay_us, static_cast<long long>(rows), rounds);
  std::printf("  measured: wall clock and getrusage of this process (client and server share the cores); modelled: the "
              "emulated devices' clock\n");
  for (int streams : stream_counts) {
    std::vector<double> ratio, model_ratio, off_rps, on_rps, off_cpu, on_cpu, off_sw, on_sw, off_model, on_model, others;
    for (int round = 0; round < rounds; ++round) {
      // Modelled requests/s: requests answered over the modelled clock's advance during the run.
      run(*plain, proto, std::max(200, total / 20), streams, inflight, rows, cols);  // warm-up: plan for this size
      const double off_c0 = modelled_clock_s(service, "gcn");
      const Result off_r = run(*plain, proto, total, streams, inflight, rows, cols);
      const Side off = side_of(off_r, total, modelled_clock_s(service, "gcn") - off_c0, 1.0);
      run(*with, proto, std::max(200, total / 20), streams, inflight, rows, cols);  // warm-up: plan for batches
      const auto [b0, r0] = batched.counts("gcn");
      const double on_c0 = modelled_clock_s(service, "gcn");
      const Result on_r = run(*with, proto, total, streams, inflight, rows, cols);
      const auto [b1, r1] = batched.counts("gcn");
      const double mean_batch = b1 > b0 ? static_cast<double>(r1 - r0) / static_cast<double>(b1 - b0) : 1.0;
      const Side on = side_of(on_r, total, modelled_clock_s(service, "gcn") - on_c0, mean_batch);
      std::printf("  %d stream(s) x %d in flight, round %d (load average %s):\n", streams, inflight, round + 1,
                  loadavg().c_str());
      print_side("off", off);
      print_side("on", on);
      std::printf("    on / off: %.2fx measured, %.2fx modelled\n", on.rps / off.rps, on.model_rps / off.model_rps);
      ratio.push_back(on.rps / off.rps);
      model_ratio.push_back(on.model_rps / off.model_rps);
      off_rps.push_back(off.rps);
      on_rps.push_back(on.rps);
      off_cpu.push_back(off.cpu_us);
      on_cpu.push_back(on.cpu_us);
      off_sw.push_back(off.switches);
      on_sw.push_back(on.switches);
      off_model.push_back(off.model_rps);
      on_model.push_back(on.model_rps);
      others.push_back(std::max(off.others_cores, on.others_cores));
    }
    std::printf("  %d stream(s) x %d in flight, median of %d: off %.0f -> on %.0f req/s measured (%.2fx; host CPU %.0f "
                "-> %.0f us/req, %.1f -> %.1f context switches/req; other processes %.2f cores), %.0f -> %.0f req/s "
                "modelled (%.2fx); target >= 2x measured: %s\n",
                streams, inflight, rounds, median(off_rps), median(on_rps), median(ratio), median(off_cpu),
                median(on_cpu), median(off_sw), median(on_sw), median(others), median(off_model), median(on_model),
                median(model_ratio), median(ratio) >= 2.0 ? "MET" : "NOT MET");
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
    const std::string client = arg(argc, argv, "--client", "threads");
    if (client != "threads" && client != "callback") throw std::runtime_error("--client: threads or callback");
    g_callback_client = client == "callback";
    std::vector<int> stream_counts;
    {
      std::stringstream ss(arg(argc, argv, "--streams", "1,2,4"));
      for (std::string t; std::getline(ss, t, ',');) stream_counts.push_back(std::stoi(t));
    }
    EngineServiceOptions so;
    so.system_config = arg(argc, argv, "--system", std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml");
    so.mode = "perf";
    std::printf("bench_daemon_grpc: system %s, load average %s, %u hardware threads, %s client\n",
                so.system_config.c_str(), loadavg().c_str(), std::thread::hardware_concurrency(), client.c_str());
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
      compare_batching(service, graphs, metrics, http.admission(), by_id, batch, total, stream_counts, inflight,
                       std::stoi(arg(argc, argv, "--rounds", "1")), nodes, spec.hidden);
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
