// dype-serve: the DyPe inference daemon. Open Inference Protocol (KServe v2) over HTTP and gRPC,
// Prometheus metrics on their own port, authenticated admin API over both (plans, mode, device
// drain, FPGA bitstream swaps confined to --bitstream-dir). Flags follow Triton's tritonserver.
//
//   dype-serve --system configs/systems/paper-testbed-pcie4.yaml --mode balanced --http-port 8000
//
// SIGTERM/SIGINT: readiness goes false at once, new requests get 503, admitted requests finish
// (up to --exit-timeout seconds), then the process exits 0.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <stop_token>
#include <mutex>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sstream>

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "runtime/daemon/batching_service.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/repository_models.h"
#include "runtime/daemon/http/tls.h"
#include "runtime/host_buffer_pool.h"
#include "runtime/host_memory.h"
#include "runtime/observer.h"
#include "hw/pinned_host_memory.h"
#ifdef DYPE_HAVE_REMOTE
#include "hw/system_file.h"
#include "runtime/remote/remote_stages.h"
#include "runtime/daemon/admin/host_join.h"
#include "runtime/remote/stage_server.h"
#endif

using namespace dype;
using namespace dype::rt::daemon;

namespace {

// What the daemon serves at start: every loadable model of the repositories, plus the built-in
// seeded models when asked for.
std::vector<ServedModel> served_models(const std::vector<std::string>& repositories, const std::string& example,
                                       bool builtin, const std::vector<std::string>& only) {
  std::vector<ServedModel> models;
  if (!repositories.empty()) {
    RepositoryLoad loaded = repository_models(repositories, only);
    for (const std::string& f : loaded.failures) spdlog::error("{}", f);
    models = std::move(loaded.models);
    if (models.empty() && !builtin) throw InputError("--model-repository", "no model could be loaded (see above)");
  }
  if (builtin) {
    for (ServedModel& m : default_models()) {
      for (const ServedModel& r : models)
        if (r.name == m.name) throw InputError("--builtin-models", "model '" + m.name + "' is also in the repository");
      models.push_back(std::move(m));
    }
  }
  if (models.empty()) {
    throw InputError("models", "nothing to serve: give --model-repository DIR (the example one, " + example +
                                   ", is not here) or --builtin-models");
  }
  return models;
}

// Each HTTP connection is a descriptor: raise the soft open-file limit to the hard one (Debian's
// soft default, 1024, is below the default --max-connections), and keep the cap below what is
// left for models, gRPC and the engine (256 descriptors held back).
std::size_t connections_within_file_limit(std::size_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return wanted;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  constexpr rlim_t kReserved = 256;
  const rlim_t room = lim.rlim_cur > 2 * kReserved ? lim.rlim_cur - kReserved : lim.rlim_cur / 2;
  if (lim.rlim_cur != RLIM_INFINITY && wanted > room) {
    spdlog::warn("--max-connections {} lowered to {}: the open-file limit is {}", wanted, room, lim.rlim_cur);
    return static_cast<std::size_t>(room);
  }
  return wanted;
}

#ifdef DYPE_HAVE_REMOTE
// --stage-server: this host runs other hosts' pipeline stages on its devices (runtime/remote/),
// with the same models as the coordinator (their weights are checked by digest per stage), until
// SIGTERM/SIGINT. No front ends: requests reach the coordinator.
int run_stage_server(const std::string& address, const std::string& host_name, const std::string& system_file,
                     std::vector<ServedModel> models, const std::string& port_file, const std::string& token,
                     std::optional<HostJoinOptions> join, sigset_t& stop_signals) {
  const hw::System system = system_file.empty() ? hw::System::detect()
                                                : hw::System::from_config(hw::load_system_config(system_file));
  std::map<std::string, std::shared_ptr<const rt::Model>> by_name;
  for (ServedModel& m : models) by_name[m.name] = m.model ? m.model : std::make_shared<const rt::Model>(rt::Model::make(m.spec));
  std::vector<hw::Device*> devices(system.devices().begin(), system.devices().end());
  rt::remote::StageServer server(
      rt::remote::UcxContext::create(), rt::remote::parse_host_port(address),
      [&](const std::string& name) -> const rt::Model* {
        const auto it = by_name.find(name);
        return it == by_name.end() ? nullptr : it->second.get();
      },
      devices, {.host = host_name, .token = token});
  spdlog::info("stage server for host '{}' on {}: {} devices, {} models{}", host_name, server.address(), devices.size(),
               by_name.size(), token.empty() ? " (no --stage-token-file: any coordinator that reaches it is served)" : "");
  if (!port_file.empty()) {
    std::ofstream f(port_file + ".tmp");
    f << "{\"stage\": " << server.port() << "}\n";
    f.close();
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  std::thread serving([&] { server.run(); });
  std::unique_ptr<HostJoiner> joiner;
  if (join) {
    if (join->address.rfind("0.0.0.0:", 0) == 0 || join->address.rfind("[::]:", 0) == 0)
      throw InputError("--advertise", "the stage server listens on every interface: say which address the coordinator reaches");
    if (join->address.ends_with(":0")) join->address = join->address.substr(0, join->address.size() - 1) + std::to_string(server.port());
    joiner = std::make_unique<HostJoiner>(*join, devices);
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: closing the stage server", sig);
  joiner.reset();
  server.stop();
  serving.join();
  spdlog::info("stage server: {} links, {} requests ({} failed)", server.stats().links.load(),
               server.stats().requests.load(), server.stats().failed.load());
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  dype::rt::retain_freed_host_memory();  // activations reuse heap pages (runtime/host_memory.h)
  // protobuf logs an ERROR line for each request it refuses (an invalid UTF-8 string, for one):
  // at debug level, so that a client cannot fill the log; the client gets the refusal itself.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
        if (level >= google::protobuf::LOGLEVEL_FATAL)
          spdlog::critical("protobuf {}:{}: {}", file, line, message);
        else
          spdlog::debug("protobuf {}:{}: {}", file, line, message);
      });
  CLI::App app{"dype-serve: pipelined GNN / sliding-window transformer inference (KServe v2 protocol)"};
  EngineServiceOptions so;
  ServerOptions ho;
  int grpc_port = 8001;
  std::string token_file, trace_file, log_level = "info", port_file;
  double exit_timeout_s = 30.0;
  double trim_interval_s = 30.0;
  app.add_option("--system", so.system_config, "system config YAML (default: detect this host)");
  std::vector<std::string> repositories;
  const std::string example_models = std::string(DYPE_SOURCE_DIR) + "/models";
  app.add_option("--model-repository", repositories,
                 "model repository folder (one folder per model: config.yaml + model.safetensors); repeatable "
                 "(default: the example repository " + example_models + " when it exists)");
  GraphRegistryLimits graph_limits;
  app.add_option("--max-graphs", graph_limits.max_graphs, "registered graphs at once")->capture_default_str();
  app.add_option("--max-graph-bytes", graph_limits.max_bytes,
                 "bytes the registered graphs may hold together (edges and normalised graphs)")
      ->capture_default_str();
  app.add_option("--graph-activation-bytes", graph_limits.max_activation_bytes,
                 "bytes of GNN activations kept over registered graphs for incremental inference, every graph's "
                 "together; past it, inference runs the whole graph (0: none kept)")
      ->capture_default_str();
  app.add_option("--graph-ttl-secs", graph_limits.idle_ttl_s,
                 "a registered graph unused this long is dropped (0: never)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  graph_limits.owner_share = 0.25;
  graph_limits.address_share = 0.5;
  app.add_option("--graph-owner-share", graph_limits.owner_share,
                 "share of --max-graphs and --max-graph-bytes one client may hold (known by its Dype-Graph-Owner "
                 "header, else its address; 1: no bound)")
      ->check(CLI::Range(0.001, 1.0))
      ->capture_default_str();
  app.add_option("--graph-address-share", graph_limits.address_share,
                 "share one client address may hold whatever owner keys it sends (1: no bound)")
      ->check(CLI::Range(0.001, 1.0))
      ->capture_default_str();
  std::string control_mode = "none";
  app.add_option("--model-control-mode", control_mode,
                 "none: serve every repository model, no load/unload while serving; explicit: serve the --load-model "
                 "ones (all without it) and load, reload or unload through the repository API (admin token); poll: "
                 "serve every model and follow the repository's changes (every --repository-poll-secs)")
      ->check(CLI::IsMember({"none", "explicit", "poll"}))
      ->capture_default_str();
  double poll_s = 15.0;
  app.add_option("--repository-poll-secs", poll_s, "with --model-control-mode poll: seconds between looks at the repository")
      ->check(CLI::Range(0.01, 86400.0));
  std::vector<std::string> load_models;
  app.add_option("--load-model", load_models, "with --model-control-mode explicit: a model to serve at start (repeatable)");
  bool no_warmup = false;
  app.add_flag("--no-warmup", no_warmup, "skip the synthetic request each model runs at start");
  bool builtin_models = false;
  app.add_flag("--builtin-models", builtin_models,
               "also serve the built-in seeded models gcn, gin and swin-transformer (random weights: demos and "
               "paper-scale timing)");
  // configs/ as every tool finds it ($DYPE_CONFIG_DIR, ./configs, the source tree's): a bundle
  // unpacked on another machine and run from a checkout finds the shipped stores there.
  std::string perfmodels = hw::default_config_dir() + "/perfmodels";
  auto* perfmodels_opt = app.add_option("--perfmodels", perfmodels,
                 "folder of fitted performance models (<device model>.json from dype-profile) to plan with; "
                 "'none': the devices' own models")
      ->capture_default_str();
  app.add_option("--mode", so.mode, "objective (latency: least end-to-end latency per request)")
      ->check(CLI::IsMember({"perf", "energy", "balanced", "qos", "latency"}));
  app.add_option("--http-port", ho.http_port, "HTTP port (0: ephemeral)");
  app.add_option("--grpc-port", grpc_port, "gRPC port (-1: off)");
  std::string grpc_socket;
  app.add_option(
      "--grpc-socket", grpc_socket,
      "also serve gRPC on this Unix-domain socket (clients: target unix:PATH, dype-client "
      "--grpc-socket): same-host clients skip TCP, about twice as fast for large tensors; with "
      "--grpc-port -1 the only gRPC listener");
  std::size_t grpc_max_streams = 4096;
  app.add_option("--grpc-max-streams", grpc_max_streams,
                 "gRPC ModelStreamInfer streams open at once (an idle stream holds no thread); more get "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--metrics-port", ho.metrics_port, "Prometheus metrics port (0: ephemeral, -1: off)");
  app.add_option("--host", ho.host, "address to listen on");
  app.add_option("--admin-token-file", token_file, "file holding the admin API token (admin API off without it)");
  std::string infer_token_file, ui_token_file;
  app.add_option("--ui-token-file", ui_token_file,
                 "file holding a token the status page's data (GET /v2/dype/status) needs: open the page as "
                 "/ui/#token=<token> (the page at /ui/ is open to anyone on the HTTP port without it)");
  app.add_option("--infer-token-file", infer_token_file,
                 "file holding an inference token: infer and graph requests (HTTP Authorization: Bearer, gRPC "
                 "'authorization' metadata) must carry it (open without it)");
  app.add_flag("--allow-client-shm", ho.allow_client_shm,
               "accept the KServe/Triton shared-memory extensions: clients register system (and, on CUDA builds, "
               "CUDA) shared-memory regions and name them in inputs and outputs instead of sending the bytes "
               "(off by default; a region belongs to the client that registered it)");
  std::string tls_cert, tls_key;
  app.add_option("--tls-cert", tls_cert,
                 "PEM certificate (chain, leaf first) to serve HTTP as HTTPS and gRPC over TLS (TLS 1.2+), with "
                 "--tls-key; the metrics port stays plain HTTP");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert (unencrypted)");
  app.add_option("--bitstream-dir", ho.bitstream_dir, "admin bitstream paths must resolve inside this folder");
  app.add_option("--state-dir", ho.state_dir,
                 "keep the operator's changes (mode, drained devices, FPGA images) in DIR/state.json, the "
                 "refined performance models in DIR/refined/ and the registered graphs that take updates in "
                 "DIR/graphs/, and restore them at start");
  app.add_option("--startup-profile-secs", so.startup_profile_s,
                 "a real accelerator with no fitted performance models for its product (in --perfmodels, or kept "
                 "in --state-dir by an earlier start) is timed on SpMM, GEMM and attention shapes for this long at "
                 "start, and planned with the fitted result, kept in DIR/perfmodels/ (0: plan it from its device "
                 "profile)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  double refined_save_s = 300.0;
  app.add_option("--refined-save-secs", refined_save_s,
                 "with --state-dir: save the refined performance models this often, and at shutdown (0: only at "
                 "shutdown)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--max-request-bytes", ho.max_request_bytes, "larger request bodies get 413");
  std::size_t receive_pool_mib = rt::receive_buffers().options().keep_bytes >> 20;
  app.add_option("--receive-pool-mb", receive_pool_mib,
                 "large payloads (gRPC raw contents, HTTP bodies of 1 MiB or more) are received into buffers kept "
                 "for the next request and, on a GPU host, pinned once, so a GPU stage uploads them by one DMA; at "
                 "most this many MiB of free buffers are kept (0: none kept, none pinned)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-response-bytes", ho.max_response_bytes,
                 "an infer response whose outputs as JSON data would take more gets 413 naming the output (binary "
                 "outputs are not bounded by it)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-queue", ho.max_queue, "admitted requests at once; more get 429");
  app.add_option("--http-threads", ho.threads, "HTTP worker threads (run handlers that may block)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--http-io-threads", ho.io_threads, "threads reading and writing every HTTP connection")
      ->check(CLI::Range(1, 256));
  app.add_option("--max-connections", ho.max_connections,
                 "open HTTP connections at once; more get 503 (capped by the open-file limit)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--idle-timeout", ho.idle_timeout_s, "seconds a keep-alive HTTP connection may sit idle")
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--header-timeout", ho.header_timeout_s,
                 "seconds from a request's first byte to its last header (slow clients are closed)")
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--body-timeout", ho.body_timeout_s, "seconds for a request body to arrive, and for a response to be taken")
      ->check(CLI::Range(0.001, 86400.0));
  std::vector<std::string> batch_specs;
  app.add_option("--batch", batch_specs,
                 "dynamic batching of small graphs, [MODEL=]MAX_SIZE[/DELAY_US] (repeatable; no MODEL: every GNN "
                 "model): concurrent requests merged into one block-diagonal graph of up to MAX_SIZE requests, "
                 "the first waiting at most DELAY_US (default 500) for the others; off by default");
  app.add_option("--max-in-flight", so.engine.max_in_flight, "requests inside each engine's pipeline at once");
  app.add_option("--trace", trace_file, "write a Chrome trace-event JSON (Perfetto) of the run on exit");
  std::size_t trace_max_events = 200000;
  app.add_option("--trace-max-events", trace_max_events,
                 "--trace keeps the most recent N events (older ones dropped and counted in the trace)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{100000000}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_option("--exit-timeout", exit_timeout_s, "seconds to let in-flight requests finish on shutdown");
  app.add_option("--trim-interval", trim_interval_s,
                 "seconds between returns of free heap pages to the OS (malloc_trim; 0: never)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--port-file", port_file, "write the bound ports as JSON here once serving (for ephemeral ports)");
  std::string stage_server, host_name;
  app.add_option("--stage-server", stage_server,
                 "HOST:PORT: run other hosts' pipeline stages on this host's devices (a worker of a multi-host "
                 "system: the coordinator's system file lists this address under hosts); no front ends");
  app.add_option("--host-name", host_name, "with --stage-server: this host's name in the coordinator's system file")
      ->default_val("worker");
  std::string join_coordinator, join_address;
  double join_interval_s = 2.0;
  app.add_option("--join", join_coordinator,
                 "with --stage-server: the coordinator's gRPC HOST:PORT; this worker reports its devices and address "
                 "there (with --stage-token-file) and keeps telling it it is there (its heartbeat)");
  app.add_option("--advertise", join_address,
                 "with --join: the stage server address the coordinator should reach (default: --stage-server's)");
  std::string join_ca;
  app.add_option("--join-ca", join_ca,
                 "with --join: PEM CA certificate(s) that signed the coordinator's --tls-cert (its gRPC is TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--join-interval-secs", join_interval_s, "with --join: seconds between heartbeats")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  std::string stage_token_file;
  app.add_option("--stage-token-file", stage_token_file,
                 "multi-host systems: the deployment's shared token (first line of the file): a worker refuses "
                 "coordinators that do not present it, a coordinator presents it to its workers");
  double host_timeout_s = 10.0, host_probe_s = 2.0;
  app.add_option("--host-timeout-secs", host_timeout_s,
                 "multi-host systems: a stage on another host that does not answer within this long fails, and "
                 "its host is left out of the plans until it answers again")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--host-probe-secs", host_probe_s,
                 "multi-host systems: seconds between attempts to reach a host left out after a failure; when its "
                 "stage server answers, its devices are planned again")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  rt::receive_buffers().set_keep_bytes(receive_pool_mib << 20);
  ho.max_connections = connections_within_file_limit(ho.max_connections);

  // Block the stop signals in every thread; the main thread takes them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    if (!token_file.empty()) ho.admin_token = read_token_file(token_file, "admin");
    if (!infer_token_file.empty()) ho.infer_token = read_token_file(infer_token_file, "inference");
    if (!ui_token_file.empty()) ho.ui_token = read_token_file(ui_token_file, "status page");
    ho.tls = load_tls_identity(tls_cert, tls_key);  // both or neither; checked before models load
    // The built-in default may be absent (binary moved away from its source tree): then the devices'
    // own models, said in the log; a folder given on the command line must exist.
    if (perfmodels != "none" && (perfmodels_opt->count() > 0 || std::filesystem::is_directory(perfmodels)))
      so.perfmodels_dir = perfmodels;
    // Without --model-repository, the example repository when it is here.
    if (repositories.empty() && std::filesystem::is_directory(example_models)) repositories = {example_models};
    if (control_mode == "poll" && repositories.empty())
      throw InputError("--model-control-mode", "poll needs a model repository to follow");
    if (!load_models.empty() && control_mode != "explicit")
      throw InputError("--load-model", "needs --model-control-mode explicit (mode none serves every model)");
    so.models = served_models(repositories, example_models, builtin_models, load_models);
    const std::string stage_token = stage_token_file.empty() ? "" : read_token_file(stage_token_file, "stage");
    if (!stage_server.empty()) {
#ifdef DYPE_HAVE_REMOTE
      std::optional<HostJoinOptions> join;
      if (!join_coordinator.empty()) {
        if (stage_token.empty())
          throw InputError("--join", "needs --stage-token-file: the coordinator takes joins only with the stage token");
        join = HostJoinOptions{.coordinator = join_coordinator, .host = host_name,
                               .address = join_address.empty() ? stage_server : join_address, .token = stage_token,
                               .interval = std::chrono::milliseconds(static_cast<std::int64_t>(join_interval_s * 1000)),
                               .tls_ca_pem = ""};
        if (!join_ca.empty()) {
          std::ifstream f(join_ca);
          join->tls_ca_pem.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
          if (join->tls_ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
            throw InputError("--join-ca", "'" + join_ca + "' holds no PEM certificate");
        }
      }
      return run_stage_server(stage_server, host_name, so.system_config, std::move(so.models), port_file, stage_token,
                              join, stop_signals);
#else
      throw InputError("--stage-server", "this build has no remote stages (UCX is left out of sanitizer builds)");
#endif
    }
#ifdef DYPE_HAVE_REMOTE
    {
      std::shared_ptr<rt::remote::UcxContext> ucx;  // made when the first model needs a remote stage
      const rt::remote::ChannelOptions link_options{
          .window = 8, .timeout = std::chrono::milliseconds(static_cast<std::int64_t>(host_timeout_s * 1000))};
      so.remote_stages = [ucx, link_options, stage_token](std::shared_ptr<const rt::HostDirectory> hosts,
                                                          const hw::SystemConfig& system, const std::string& name,
                                                          const rt::Model& model) mutable
          -> std::function<void(rt::PipelineSpec&)> {
        if (!ucx) ucx = rt::remote::UcxContext::create();
        auto attach = std::make_shared<rt::remote::RemoteStageAttacher>(system, std::move(hosts), ucx, model, name,
                                                                        link_options, stage_token);
        return [attach](rt::PipelineSpec& spec) { (*attach)(spec); };
      };
    }
#endif
    so.state_dir = ho.state_dir;
    // On every engine from its first pipeline on (warm-up included), and on models loaded later.
    auto trace = std::make_shared<rt::ChromeTraceObserver>(trace_max_events);
    if (!trace_file.empty()) so.engine.observers.push_back(trace);
    so.repositories = repositories;
    so.model_control = control_mode == "explicit";
    BatchPolicies batch_policies;
    for (const std::string& spec : batch_specs) {
      auto [name, policy] = parse_batch_spec(spec);
      batch_policies.insert_or_assign(name, policy);
    }
    EngineService service(so);
    for (const auto& [name, policy] : batch_policies) {
      if (name.empty()) continue;
      service.model(name);  // NotFound names an unserved model
      if (!service.model(name).model->is_gnn()) throw InputError("--batch", "model '" + name + "' is not a GNN");
    }
    BatchingService batched(service, batch_policies);
    for (const auto& [name, policy] : batch_policies)
      if (policy.max_size > 1)
        spdlog::info("dynamic batching for {}: up to {} requests, {} us queue delay", name.empty() ? "every GNN model" : name,
                     policy.max_size, policy.max_queue_delay_us);
    spdlog::info("kernel times for planning: {}", service.cost_source());
    if (!no_warmup)
      for (const std::string& line : service.warm_up()) spdlog::info("{}", line);
    GraphRegistry graphs(graph_limits);
    if (!ho.state_dir.empty())  // graphs that take updates come back at their last version
      for (const std::string& line : graphs.persist(std::make_shared<GraphStore>(ho.state_dir)))
        spdlog::info("state restored: {}", line);
    Metrics metrics;
    HttpServer http(batched, graphs, metrics, ho, admin_hooks(service));
    for (const std::string& line : http.admin().restore_state()) spdlog::info("state restored: {}", line);
    http.admin().set_join_token(stage_token);  // workers join with the stage token (dype-serve --join)
    http.start();
    std::unique_ptr<GrpcServer> grpc;
    if (grpc_port >= 0 || !grpc_socket.empty()) {
      grpc = std::make_unique<GrpcServer>(batched, graphs, metrics, http.admission(), ho.host, grpc_port,
                                          ho.max_request_bytes, &http.admin());
      grpc->set_infer_token(ho.infer_token);
      grpc->set_shared_memory(&http.shared_memory());
      grpc->set_max_streams(grpc_max_streams);
      if (!grpc_socket.empty()) grpc->set_unix_socket(grpc_socket);
      if (ho.tls) grpc->set_tls(*ho.tls);
      // Workers that wait for the engine each hold an admitted request: --max-queue bounds them.
      grpc->set_max_workers(std::clamp<std::size_t>(ho.max_queue, 4, 1024));
      grpc->start();
    }
    for (const ModelInfo& m : service.models())
      spdlog::info("model {} version {} ({}): plan {} [{}]", m.name, m.version, m.family, service.engine(m.name).current_label(),
                   rt::describe(service.engine(m.name).current_spec()));
    spdlog::info("dype-serve: {} on {}:{}, gRPC{} on port {}, metrics (plain HTTP) on port {}, mode {}",
                 ho.tls ? "HTTPS" : "HTTP", ho.host, http.http_port(), ho.tls ? " over TLS" : "", grpc ? grpc->port() : -1,
                 http.metrics_port(), service.mode());
    if (grpc && !grpc_socket.empty())
      spdlog::info("gRPC also on the Unix-domain socket {}", grpc_socket);
    if (hw::can_pin_host_memory() && receive_pool_mib > 0)
      spdlog::info("received payloads of 1 MiB or more: pinned once for the GPUs' DMA and kept for the next "
                   "request (up to {} MiB free, --receive-pool-mb)",
                   receive_pool_mib);
    spdlog::info("status page: {}://{}:{}/ui/{}", ho.tls ? "https" : "http", ho.host, http.http_port(),
                 ho.ui_token.empty() ? "" : "#token=<the --ui-token-file token>");
    // --model-control-mode poll: a thread looks at the repositories and follows their changes.
    std::jthread poller;
    if (control_mode == "poll") {
      poller = std::jthread([&service, poll_s](std::stop_token stop) {
        std::mutex mu;
        std::condition_variable_any cv;
        std::unique_lock lock(mu);
        while (!stop.stop_requested()) {
          cv.wait_for(lock, stop, std::chrono::duration<double>(poll_s), [] { return false; });  // wakes on stop
          if (stop.stop_requested()) break;
          try {
            for (const std::string& change : service.poll_repository()) spdlog::info("repository poll: {}", change);
          } catch (const std::exception& e) {
            spdlog::error("repository poll: {}", e.what());
          }
        }
      });
    }
    // --state-dir: what the planners learnt is saved every --refined-save-secs and at shutdown, so a
    // crash loses at most one interval of it.
    auto save_refined = [&service](bool at_exit = false) {
      try {
        for (const std::string& line : service.save_refined())
          spdlog::log(at_exit ? spdlog::level::info : spdlog::level::debug, "refined models saved: {}", line);
      } catch (const std::exception& e) {
        spdlog::error("refined models not saved: {}", e.what());
      }
    };
#ifdef DYPE_HAVE_REMOTE
    // Hosts left out after a failure rejoin once their stage server answers again.
    std::jthread host_prober;
    if (!service.system().config().hosts.empty()) {
      host_prober = std::jthread([&service, host_probe_s, host_timeout_s](std::stop_token stop) {
        std::shared_ptr<rt::remote::UcxContext> ucx;
        std::mutex mu;
        std::condition_variable_any cv;
        std::unique_lock lock(mu);
        while (!stop.stop_requested()) {
          cv.wait_for(lock, stop, std::chrono::duration<double>(host_probe_s), [] { return false; });
          if (stop.stop_requested()) break;
          // A joined host whose heartbeats stopped is left out, with or without traffic to it.
          for (const std::string& host : service.host_directory()->silent_since(hw::now_s() - host_timeout_s)) {
            const int n = service.fail_host(host, "no heartbeat for " + std::to_string(host_timeout_s) + " s");
            if (n > 0) spdlog::warn("host {}: no heartbeat for {} s, left out of the plans ({} models re-planned)", host, host_timeout_s, n);
          }
          for (const std::string& host : service.hosts_with_failed_devices()) {
            const auto address = service.host_directory()->address(host);
            if (!address) continue;
            // A joined host comes back by joining again; its heartbeats say it is there.
            if (service.host_directory()->joined(host)) continue;
            try {
              if (!ucx) ucx = rt::remote::UcxContext::create();
              auto ch = rt::remote::UcxChannel::connect(ucx, rt::remote::parse_host_port(*address),
                                                        {.window = 1, .timeout = std::chrono::milliseconds(1000)});
              ch.close();
            } catch (const std::exception&) {
              continue;  // still away
            }
            const int n = service.restore_host(host);
            spdlog::info("host {} ({}) answers again: its devices are planned again ({} models re-planned)", host,
                         *address, n);
          }
        }
      });
    }
#endif
    std::jthread refined_saver;
    if (!ho.state_dir.empty() && refined_save_s > 0) {
      refined_saver = std::jthread([&save_refined, refined_save_s](std::stop_token stop) {
        std::mutex mu;
        std::condition_variable_any cv;
        std::unique_lock lock(mu);
        while (!stop.stop_requested()) {
          cv.wait_for(lock, stop, std::chrono::duration<double>(refined_save_s), [] { return false; });
          if (!stop.stop_requested()) save_refined();
        }
      });
    }
    if (!port_file.empty()) {
      std::ofstream f(port_file + ".tmp");
      f << "{\"http\": " << http.http_port() << ", \"grpc\": " << (grpc ? grpc->port() : -1)
        << ", \"metrics\": " << http.metrics_port()
        << ", \"grpc_socket\": " << nlohmann::json(grpc_socket).dump() << "}\n";
      f.close();
      std::rename((port_file + ".tmp").c_str(), port_file.c_str());  // readers see it whole
    }

    // While serving, the main thread only waits for a stop signal; between signals it hands the
    // free pages that glibc's per-thread arenas keep back to the OS. The live heap stays nearly
    // flat under a long stream, but the arenas' retained free memory grew RSS by ~0.5 MB/min in a
    // 30 min soak.
    int sig = 0;
    if (trim_interval_s > 0) {
      const auto whole = static_cast<std::time_t>(trim_interval_s);
      const timespec period{whole, static_cast<long>((trim_interval_s - static_cast<double>(whole)) * 1e9)};
      while ((sig = sigtimedwait(&stop_signals, nullptr, &period)) < 0) {
        if (errno == EAGAIN) malloc_trim(0);  // EINTR: wait again
      }
    } else {
      sigwait(&stop_signals, &sig);
    }
    spdlog::info("signal {}: not ready, refusing new requests, finishing in-flight ones", sig);
    if (poller.joinable()) {
      poller.request_stop();
      poller.join();
    }
    http.begin_shutdown();
    if (grpc) grpc->set_serving(false);
    if (!http.wait_idle(exit_timeout_s)) spdlog::warn("exit timeout: requests still in flight after {} s", exit_timeout_s);
    batched.drain();
    if (refined_saver.joinable()) {
      refined_saver.request_stop();
      refined_saver.join();
    }
    if (!ho.state_dir.empty()) save_refined(true);
    if (grpc) grpc->stop(1.0);
    http.stop();
    if (!trace_file.empty()) trace->write(trace_file);
    spdlog::info("dype-serve: stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
