// dype-client: a command-line client for dype-serve (Open Inference Protocol over HTTP or gRPC).
//
//   dype-client infer  --model gcn --mtx tests/data/foo.mtx            # prints output shape + checksum
//   dype-client infer  --model gcn --nodes 2000 --edges 20000 --protocol grpc
//   dype-client stream --model gcn --requests 400 --rate 50 --concurrency 4
//                      --drift 0:2000x8000,200:4000x120000    (at request 200 the graph changes)
//   dype-client stream --model gcn --dir graphs/ --per-file 100 --protocol grpc   (one phase per file)
//   dype-client stream --model gcn --updates drift --update-drift 0:2,300:5000 --requests 400
//                      --graph deps.mtx       (a streaming graph: updates, each with its answer)
//   dype-client stream --model gcn --updates updates.txt --nodes 2000 --edges 8000
//   dype-client admin  --token-file tok plan | mode energy | pareto | devices | drain gpu0 | undrain gpu0 |
//                      load-bitstream fpga0 u280-sextans-swat.yaml | unload-bitstream fpga0 |
//                      choose-images [HORIZON [apply]]   (the FPGA images --model's plan wants)
//
// A stream registers each phase's graph once (POST /v2/dype/graphs) and sends only features with
// parameters.graph_id, as the paper preloads graphs; --whole-graphs sends the graph with every
// request instead. Registered graphs are deleted when the stream ends. Over gRPC each worker keeps
// one ModelStreamInfer stream. Latencies are measured at the client (wall clock, request sent to
// response parsed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "cuda_region.h"
#include "graph/generators.h"
#include "graph/snap_reader.h"
#include "infer.h"
#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/http/tls.h"
#include "runtime/host_memory.h"
#include "shm_region.h"
#include "transport.h"
#include "update_stream.h"
#include "workload.h"

using namespace dype;
using namespace dype::client;
using rt::daemon::RequestedOutput;
using rt::daemon::Tensor;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A phase ready to send: its request tensors and parameters, and the graph id to delete after.
struct Phase {
  PhaseSpec spec;
  std::vector<Tensor> inputs;
  json params = json::object();
  std::string graph_id;
};

// Deletes the graphs a stream registered, also when the stream fails half-way.
struct RegisteredGraphs {
  const Endpoint& ep;
  std::vector<std::string> ids;
  ~RegisteredGraphs() {
    int deleted = 0;
    for (const std::string& id : ids) {
      try {
        deleted += delete_graph(ep, id) ? 1 : 0;
      } catch (const std::exception& e) {
        std::cerr << "dype-client: could not delete registered graph " << id << ": " << e.what() << "\n";
      }
    }
    if (!ids.empty()) std::cout << "deleted " << deleted << " of " << ids.size() << " registered graphs\n";
  }
};

int run_stream(const Endpoint& ep, Protocol protocol, const std::string& model,
               std::vector<PhaseSpec> specs, int requests, int per_file, double rate,
               int concurrency, bool whole_graphs, bool shm, std::optional<int> cuda_device,
               std::uint64_t seed) {
  if (concurrency < 1) throw InputError("--concurrency", "must be at least 1, got " + std::to_string(concurrency));
  if (requests < 1) throw InputError("--requests", "must be at least 1, got " + std::to_string(requests));
  if (rate < 0) throw InputError("--rate", "must not be negative");
  const std::unique_ptr<Transport> control = make_transport(protocol, ep, false);
  const ModelInfo info = control->model_info(model);
  const char* shm_flag = cuda_device ? "--cuda-shm" : "--shm";
  shm = shm || cuda_device.has_value();
  if (shm && info.out_columns <= 0)
    throw InputError(shm_flag, "model '" + model + "' answers no output y to place in a region");
  RegisteredGraphs registered{ep, {}};
  // --shm / --cuda-shm: each phase's x in a region of its own, written once; each worker's y into
  // its own (system shared memory, or GPU memory registered by IPC handle).
  std::vector<std::unique_ptr<NamedRegion>> regions;
  std::int64_t max_rows = 0;
  std::vector<Phase> phases;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Phase p{std::move(specs[i]), {}, json::object(), ""};
    const PhaseSpec& s = p.spec;
    if (info.transformer) {
      if (s.seq_len == 0) throw InputError("model '" + model + "'", "is a transformer: it takes token sequences, not graph files");
      p.inputs.push_back(Tensor::from_f32("x", {s.seq_len, info.features}, kernels::generate_features(s.seq_len, info.features, seed + i)));
      p.params["window"] = s.window;
    } else {
      const std::int64_t n = s.graph.num_nodes;
      p.inputs.push_back(Tensor::from_f32("x", {n, info.features}, kernels::generate_features(n, info.features, seed + i)));
      if (whole_graphs) {
        for (Tensor& t : graph_tensors(s.graph)) p.inputs.push_back(std::move(t));
      } else {
        p.graph_id = register_graph(ep, s.graph);
        registered.ids.push_back(p.graph_id);
        p.params["graph_id"] = p.graph_id;
      }
    }
    max_rows = std::max(max_rows, p.inputs.front().shape[0]);
    if (shm) {
      const Tensor x = std::move(p.inputs.front());
      regions.push_back(
          make_region(*control, "x" + std::to_string(i), x.bytes().size(), cuda_device));
      regions.back()->write(x.bytes().data(), x.bytes().size());
      p.inputs.front() = regions.back()->tensor("x", "FP32", x.shape);
    }
    std::cout << "phase " << i << " from request " << s.at << ": " << s.source
              << (p.graph_id.empty() ? "" : ", registered as " + p.graph_id) << "\n";
    phases.push_back(std::move(p));
  }
  auto phase_of = [&](int i) -> const Phase& {
    // Directory streams repeat their files when more requests are asked for than they hold.
    if (per_file > 0) {
      const int total = per_file * static_cast<int>(phases.size());
      return phases[static_cast<std::size_t>((i % total) / per_file)];
    }
    const Phase* p = &phases[0];
    for (const Phase& q : phases)
      if (i >= q.spec.at) p = &q;
    return *p;
  };

  std::atomic<int> next{0}, ok{0}, failed{0};
  std::mutex mu;
  std::vector<double> lat_ms;
  std::map<std::string, int> errors;
  const long epoch0 = plan_epoch(ep, model);
  const auto start = Clock::now();
  std::vector<std::vector<RequestedOutput>> worker_outputs(static_cast<std::size_t>(concurrency));
  if (shm)
    for (int w = 0; w < concurrency; ++w) {
      regions.push_back(make_region(
          *control, "y" + std::to_string(w),
          static_cast<std::size_t>(max_rows * info.out_columns) * sizeof(float), cuda_device));
      worker_outputs[static_cast<std::size_t>(w)].push_back(regions.back()->output("y"));
    }
  std::atomic<int> worker_ids{0};
  auto worker = [&] {
    const std::vector<RequestedOutput>& outputs = worker_outputs[static_cast<std::size_t>(worker_ids.fetch_add(1))];
    std::unique_ptr<Transport> t;
    for (int i; (i = next.fetch_add(1)) < requests;) {
      if (rate > 0) std::this_thread::sleep_until(start + std::chrono::duration<double>(i / rate));
      const Phase& p = phase_of(i);
      const auto t0 = Clock::now();
      try {
        if (!t) t = make_transport(protocol, ep, /*streaming=*/true);
        t->infer(model, p.inputs, p.params, outputs);
        std::lock_guard lock(mu);
        lat_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        ++ok;
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        ++errors[std::string(e.what()).substr(0, 160)];
        ++failed;
      }
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < concurrency; ++i) ts.emplace_back(worker);
  std::atomic<bool> done{false};
  // Per plan epoch: the requests answered and the time spent while it served (sampled every
  // 100 ms at the client), so each re-plan's throughput change is measured, not predicted.
  struct EpochSpan {
    long epoch = -1;
    std::string label;
    int answered = 0;
    double seconds = 0.0;
  };
  std::vector<EpochSpan> spans;
  std::thread live([&] {
    int last = 0, sampled = 0;
    long last_epoch = epoch0;
    auto tick = Clock::now(), sample_t = start;
    for (int n = 1; !done.load(); ++n) {
      const auto next_sample = start + std::chrono::milliseconds(100 * n);
      while (!done.load() && Clock::now() < next_sample) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const auto now_t = Clock::now();
      const int now = ok.load();
      std::string label;
      const long e = plan_epoch(ep, model, &label);
      if (spans.empty() || spans.back().epoch != e) spans.push_back({e, label, 0, 0.0});
      spans.back().answered += now - sampled;
      spans.back().seconds += std::chrono::duration<double>(now_t - sample_t).count();
      sampled = now;
      sample_t = now_t;
      if (done.load() || now_t < tick + std::chrono::seconds(1)) continue;
      tick += std::chrono::seconds(1);
      std::vector<double> snapshot;
      {
        std::lock_guard lock(mu);
        snapshot = lat_ms;
      }
      std::cout << "[" << std::chrono::duration<double>(now_t - start).count() << " s] " << now - last
                << " req/s, p50 " << percentile(snapshot, 0.5) << " ms, p99 " << percentile(snapshot, 0.99)
                << " ms, plan epoch " << e << " " << label << (e != last_epoch ? " (changed)" : "") << "\n"
                << std::flush;
      last = now;
      last_epoch = e;
    }
  });
  for (auto& t : ts) t.join();
  done = true;
  live.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const long epoch1 = plan_epoch(ep, model);
  std::cout << "summary (measured at the client, " << (protocol == Protocol::grpc ? "gRPC stream" : "HTTP") << "): " << ok
            << " ok, " << failed << " failed in " << wall << " s, " << ok / wall << " req/s, p50 "
            << percentile(lat_ms, 0.5) << " ms, p99 " << percentile(lat_ms, 0.99) << " ms, plan changes "
            << (epoch0 >= 0 && epoch1 >= 0 ? std::to_string(epoch1 - epoch0) : "unknown") << "\n";
  if (spans.size() > 1 || (spans.size() == 1 && spans[0].epoch >= 0)) {
    for (const EpochSpan& sp : spans) {
      if (sp.seconds <= 0) continue;
      std::cout << "  plan epoch " << sp.epoch << " " << sp.label << ": " << sp.answered << " answered in " << sp.seconds
                << " s, " << sp.answered / sp.seconds << " req/s (measured)\n";
    }
  }
  for (const auto& [e, n] : errors) std::cout << "  " << n << " x " << e << "\n";
  return failed == 0 ? 0 : 2;
}

// The admin API's client: the endpoint's address and TLS settings, none of its inference headers
// (run_admin sends the admin token itself).
Endpoint admin_endpoint(Endpoint ep) {
  ep.token.clear();
  ep.graph_owner.clear();
  return ep;
}

int run_admin(httplib::Client& c, const std::string& token_file, const std::string& admin_model,
              const std::vector<std::string>& admin_args) {
  std::ifstream tf(token_file);
  std::string token;
  if (!tf || !std::getline(tf, token)) throw InputError(token_file, "cannot read the token");
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  const httplib::Headers h{{"Authorization", "Bearer " + token}};
  const std::string& cmd = admin_args[0];
  auto need = [&](std::size_t n) {
    if (admin_args.size() != n + 1) throw InputError("admin " + cmd, "takes " + std::to_string(n) + " argument(s)");
  };
  const std::string q = admin_model.empty() ? "" : "?model=" + admin_model;
  auto send = [&]() -> httplib::Result {
    if (cmd == "plan") return c.Get(("/v2/dype/admin/plan" + q).c_str(), h);
    if (cmd == "devices") return c.Get("/v2/dype/admin/devices", h);
    if (cmd == "pareto") return c.Get(("/v2/dype/admin/pareto" + q).c_str(), h);
    if (cmd == "mode") {
      need(1);
      return c.Post("/v2/dype/admin/mode", h, json{{"mode", admin_args[1]}}.dump(), "application/json");
    }
    if (cmd == "drain" || cmd == "undrain") {
      need(1);
      return c.Post(("/v2/dype/admin/devices/" + admin_args[1] + "/" + cmd).c_str(), h, "", "application/json");
    }
    if (cmd == "load-bitstream") {
      need(2);
      return c.Post("/v2/dype/admin/bitstreams/load", h, json{{"device", admin_args[1]}, {"path", admin_args[2]}}.dump(),
                    "application/json");
    }
    if (cmd == "unload-bitstream") {
      need(1);
      return c.Post("/v2/dype/admin/bitstreams/unload", h, json{{"device", admin_args[1]}}.dump(), "application/json");
    }
    if (cmd == "choose-images") {
      // The proposal; "apply" carries it out. HORIZON: requests a reload is amortised over.
      if (admin_args.size() > 3 || (admin_args.size() == 3 && admin_args[2] != "apply"))
        throw InputError("admin choose-images", "takes [HORIZON [apply]]");
      json body = json::object();
      if (!admin_model.empty()) body["model"] = admin_model;
      if (admin_args.size() >= 2) {
        double horizon = 0.0;
        try {
          std::size_t used = 0;
          horizon = std::stod(admin_args[1], &used);
          if (used != admin_args[1].size()) throw std::invalid_argument("trailing text");
        } catch (const std::exception&) {
          throw InputError("admin choose-images HORIZON", "'" + admin_args[1] + "' is not a number");
        }
        body["horizon"] = horizon;
      }
      body["apply"] = admin_args.size() == 3;
      return c.Post("/v2/dype/admin/images", h, body.dump(), "application/json");
    }
    // The model repository extension: index, load NAME [CONFIG.yaml], unload NAME.
    if (cmd == "index") return c.Post("/v2/repository/index", h, "{}", "application/json");
    if (cmd == "load") {
      if (admin_args.size() != 2 && admin_args.size() != 3) throw InputError("load", "takes a model name and optionally a config.yaml");
      json body = json::object();
      if (admin_args.size() == 3) {
        std::ifstream f(admin_args[2]);
        if (!f) throw InputError(admin_args[2], "cannot read the config");
        std::stringstream text;
        text << f.rdbuf();
        body["parameters"] = {{"config", text.str()}};
      }
      return c.Post(("/v2/repository/models/" + admin_args[1] + "/load").c_str(), h, body.dump(), "application/json");
    }
    if (cmd == "unload") {
      need(1);
      return c.Post(("/v2/repository/models/" + admin_args[1] + "/unload").c_str(), h, "{}", "application/json");
    }
    throw InputError("admin", "unknown command '" + cmd + "'");
  };
  httplib::Result r = send();
  if (!r) throw Error("no response from server: " + http_error(r.error()));
  try {
    std::cout << json::parse(r->body).dump(2) << "\n";
  } catch (const json::parse_error&) {
    std::cout << r->body << "\n";
  }
  return r->status == 200 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A server that closes a TLS connection is an error from the call, not SIGPIPE: cpp-httplib writes
  // TLS records through OpenSSL's socket BIO, which does not ask the kernel to hold the signal back.
  std::signal(SIGPIPE, SIG_IGN);
  // A request body of tens of MB is built for every request: reuse the heap's pages instead of
  // faulting in fresh ones each time (runtime/host_memory.h).
  dype::rt::retain_freed_host_memory();
  CLI::App app{"dype-client: talk to dype-serve"};
  app.require_subcommand(1);
  Endpoint ep;
  std::string protocol_name = "http";
  app.add_option("--host", ep.host, "server address");
  app.add_option("--http-port", ep.http_port, "server HTTP port (also used to register graphs)");
  app.add_option("--grpc-port", ep.grpc_port, "server gRPC port");
  app.add_option("--grpc-socket", ep.grpc_socket,
                 "talk gRPC over the server's Unix-domain socket (dype-serve --grpc-socket) "
                 "instead of --grpc-port");
  std::string infer_token_file;
  app.add_option("--infer-token-file", infer_token_file,
                 "file holding the server's inference token (dype-serve --infer-token-file), sent with every "
                 "infer and graph request");
  app.add_option("--graph-owner", ep.graph_owner,
                 "owner key of the graphs this client registers (Dype-Graph-Owner; default: known by its address)");
  app.add_option("--metrics-port", ep.metrics_port, "server metrics port (plan changes during stream)");
  app.add_option("--protocol", protocol_name, "http or grpc")->check(CLI::IsMember({"http", "grpc"}));
  app.add_flag("--tls", ep.tls,
               "talk to a dype-serve started with --tls-cert: HTTPS and gRPC over TLS, the server's certificate "
               "checked against the system's trusted CAs (the metrics port stays plain HTTP)");
  app.add_option("--tls-ca", ep.tls_ca_file,
                 "PEM file of the CA(s) to trust for the server's certificate (implies --tls)");

  auto* infer = app.add_subcommand("infer", "one request; prints the output's shape and checksum (and top classes for small outputs)");
  InferOptions io;
  std::string model = "gcn";
  std::uint64_t seed = 1;
  infer->add_option("--model", io.model);
  infer->add_option("--graph,--mtx,--snap", io.graph, "graph file: Matrix Market (.mtx) or a SNAP edge list");
  infer->add_option("--features", io.features, "input x from a .npy (float32/float64) or .safetensors file (default: generated)");
  infer->add_option("--out", io.out, "write the output as .npy (float32)");
  infer->add_option("--top-k", io.top_k, "classes printed per row for outputs of at most 64 rows (0: none)");
  infer->add_option("--nodes", io.nodes, "generated graph: nodes");
  infer->add_option("--edges", io.edges, "generated graph: edges");
  infer->add_option("--seq-len", io.seq_len, "transformer: tokens (generated x)");
  infer->add_option("--window", io.window, "transformer: attention window (default: the model's own)");
  infer->add_option("--seed", io.seed);
  infer->add_flag("--shm", io.shm,
                  "send x and receive y through system shared-memory regions this client creates and registers "
                  "(dype-serve --allow-client-shm) instead of the protocol");
  infer
      ->add_flag("--cuda-shm", io.cuda_shm,
                 "send x and receive y through CUDA shared-memory regions: GPU memory this client "
                 "allocates and registers by IPC handle (a CUDA or HIP build of dype-client and of "
                 "dype-serve --allow-client-shm; HIP memory where the host's GPUs answer to HIP)")
      ->excludes("--shm");
  infer->add_option("--cuda-device", io.cuda_device,
                    "the GPU device --cuda-shm allocates on (default 0)");

  auto* stream = app.add_subcommand("stream", "a stream of requests: a drift schedule or a directory of graph files");
  int requests = 0, concurrency = 4, per_file = 50;
  double rate = 0.0;
  std::string drift = "0:1000x8000", dir;
  bool whole_graphs = false;
  stream->add_option("--model", model);
  stream->add_option("--requests", requests, "requests in all (default: 200, or every file's --per-file; a directory repeats)");
  stream->add_option("--rate", rate, "requests per second in total (0: as fast as possible)");
  stream->add_option("--concurrency", concurrency, "client workers (over gRPC, one stream each)");
  auto* drift_opt = stream->add_option(
      "--drift", drift, "at_request:NODESxEDGES (GNN) or at_request:SEQxWINDOW (transformer), comma separated");
  stream->add_option("--dir", dir, "stream the graph files of a directory (.mtx, SNAP .txt/.edges/.el/.tsv), in name order")
      ->excludes(drift_opt);
  stream->add_option("--per-file", per_file, "requests per graph file with --dir");
  stream->add_flag("--whole-graphs", whole_graphs, "send the graph with every request instead of registering it once");
  bool shm = false;
  stream->add_flag("--shm", shm,
                   "x and y through system shared-memory regions (dype-serve --allow-client-shm): each phase's x "
                   "written once into a region, each worker's y answered into its own");
  bool stream_cuda_shm = false;
  int stream_cuda_device = 0;
  stream
      ->add_flag("--cuda-shm", stream_cuda_shm,
                 "the same through CUDA shared-memory regions: GPU memory this client allocates "
                 "and registers by IPC handle (CUDA or HIP builds)")
      ->excludes("--shm");
  stream->add_option("--cuda-device", stream_cuda_device,
                     "the GPU device --cuda-shm allocates on (default 0)");
  stream->add_option("--seed", seed);
  UpdateStreamOptions updates;
  std::string update_graph;
  std::int64_t update_nodes = 2000, update_edges = 8000;
  auto* updates_opt = stream->add_option(
      "--updates", updates.updates_file,
      "a streaming graph: register the graph with its features, then send updates, each followed by the answer for the "
      "nodes it changed: an update file (docs/streaming-graphs.md gives its format) or 'drift' (generated: "
      "--update-drift)");
  updates_opt->excludes("--dir")
      ->excludes("--whole-graphs")
      ->excludes("--shm")
      ->excludes("--cuda-shm");
  stream->add_option("--update-drift", updates.drift,
                     "with --updates drift: at_update:EDGES, comma separated (each update adds EDGES random edges)");
  stream->add_option("--graph", update_graph, "with --updates: the graph file (default: generated, --nodes/--edges)");
  stream->add_option("--nodes", update_nodes, "with --updates: nodes of the generated graph");
  stream->add_option("--edges", update_edges, "with --updates: edges of the generated graph");
  bool no_answer = false;
  stream->add_flag("--no-answer", no_answer, "with --updates: send only the updates, no inference after each");

  auto* graphs = app.add_subcommand("graphs", "the graphs this client (--graph-owner, else this address) registered");
  std::string graphs_action = "list";
  graphs->add_option("action", graphs_action, "list | delete (drop them all)")->check(CLI::IsMember({"list", "delete"}));
  auto* admin = app.add_subcommand("admin", "admin API over HTTP (needs the server's token)");
  std::string token_file, admin_model;
  std::vector<std::string> admin_args;
  admin->add_option("--token-file", token_file)->required();
  admin->add_option("--model", admin_model, "limit plan/pareto to one model");
  admin->add_option("command", admin_args, "plan | mode M | pareto | devices | drain DEV | undrain DEV | load-bitstream DEV PATH | unload-bitstream DEV")
      ->required();
  auto* repository = app.add_subcommand("repository", "model repository over HTTP (needs the server's token)");
  std::vector<std::string> repository_args;
  repository->add_option("--token-file", token_file)->required();
  repository->add_option("command", repository_args, "index | load MODEL [CONFIG.yaml] | unload MODEL")
      ->required()
      ->check([](const std::string& s) { return s.empty() ? std::string("empty command") : std::string(); });
  CLI11_PARSE(app, argc, argv);
  const Protocol protocol = protocol_name == "grpc" ? Protocol::grpc : Protocol::http;

  try {
    if (!infer_token_file.empty()) ep.token = rt::daemon::read_token_file(infer_token_file, "inference");
    if (!ep.tls_ca_file.empty()) {
      ep.tls = true;
      ep.tls_ca_pem = rt::daemon::load_ca_certificates(ep.tls_ca_file, "--tls-ca");
    }
    if (*infer) {
      io.protocol_name = protocol_name;
      return run_infer(*make_transport(protocol, ep, false), io);
    }
    if (*stream && !updates.updates_file.empty()) {
      updates.model = model;
      if (updates.updates_file == "drift") updates.updates_file.clear();
      updates.updates = requests > 0 ? requests : 200;
      updates.answer = !no_answer;
      updates.seed = seed;
      updates.graph = update_graph.empty() ? rt::random_graph(update_nodes, update_edges, seed) : read_graph_file(update_graph);
      return run_update_stream(ep, protocol, updates);
    }
    if (*stream) {
      const bool from_dir = !dir.empty();
      std::vector<PhaseSpec> specs;
      if (from_dir) {
        specs = directory_phases(dir, per_file);
      } else {
        specs = drift_phases(drift, make_transport(protocol, ep, false)->model_info(model).transformer, seed);
      }
      if (requests == 0) requests = from_dir ? per_file * static_cast<int>(specs.size()) : 200;
      return run_stream(ep, protocol, model, std::move(specs), requests, from_dir ? per_file : 0,
                        rate, concurrency, whole_graphs, shm,
                        stream_cuda_shm ? std::optional<int>(stream_cuda_device) : std::nullopt,
                        seed);
    }
    if (*graphs) {
      if (graphs_action == "delete") {
        const auto ids = delete_all_graphs(ep);
        std::cout << "deleted " << ids.size() << " graphs\n";
        for (const std::string& id : ids) std::cout << "  " << id << "\n";
      } else {
        const nlohmann::json list = list_graphs(ep);
        std::cout << list.size() << " graphs registered\n";
        for (const auto& g : list)
          std::cout << "  " << g["id"].get<std::string>() << "  " << g["nodes"] << " nodes, " << g["edges"] << " edges, "
                    << g["bytes"] << " bytes, idle " << g["idle_s"].get<double>() << " s\n";
      }
      return 0;
    }
    if (*admin) {
      return run_admin(*http_client(admin_endpoint(ep), ep.http_port), token_file, admin_model, admin_args);
    }
    if (*repository) {
      return run_admin(*http_client(admin_endpoint(ep), ep.http_port), token_file, "", repository_args);
    }
  } catch (const std::exception& e) {
    std::cerr << "dype-client: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
