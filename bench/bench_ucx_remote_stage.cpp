// bench_ucx_remote_stage: what a pipeline stage on another host costs on top of its kernels
// (runtime/stage_link.h over UCX, runtime/remote/). Two processes on this machine (fork before
// either starts UCX): the child is a stage server with one emulated MI210 (kernels computed on the
// CPU), the parent links to it and runs GCN's GEMM kernel there on a rows x 64 activation
// (rows = 4096: 1 MiB in, 1 MiB out), one request at a time, as a stage worker does.
//
//   round trip   UcxStageLink::run(): the description and the input frame sent, the server's
//                pipeline run, the output frame back and unframed (measured here).
//   remote stage the server's own pipeline time for the request (measured there, in the reply).
//   hand-off     (round trip - remote stage) / 2: the host-side cost of one cross-host hand-off
//                of the activation, the figure issue 20 targets (<= 100 us median for 1 MB).
//   wire         the same bytes over the same server's probe link (path_probe.h: send -> 1-byte
//                acknowledgement, minus half the round trip of a 64-byte probe): what UCX alone
//                takes to move them one way on this path, measured in the same run.
//   beyond wire  hand-off - wire: what dype adds to a hand-off (framing, the stage protocol,
//                the server's pipeline entry and exit, host copies).
//
// Medians and p90 over --iters after --warmup. Both processes share this machine's cores (2
// here), so these are this machine's figures over loopback TCP, not a NIC's.
//
//   bench_ucx_remote_stage [--iters 300] [--warmup 20] [--rows 4096] [--transports tcp]
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hw/system.h"
#include "hw/system_config.h"
#include "graph/generators.h"
#include "runtime/host_memory.h"
#include "runtime/model.h"
#include "runtime/remote/path_probe.h"
#include "runtime/remote/stage_server.h"
#include "runtime/remote/ucx_stage_link.h"
#include "bench/bench_common.h"

using namespace dype;
using namespace dype::rt;
using namespace dype::rt::remote;

namespace {

using bench::arg;
using bench::percentile;

Model bench_model() { return Model::gcn({.layers = 1, .in_features = 64, .hidden = 64, .seed = 3}); }

hw::System one_gpu() {
  const std::string dir = std::string(DYPE_SOURCE_DIR) + "/configs";
  const std::string path = (std::filesystem::temp_directory_path() / ("dype-bench-stage-" + std::to_string(getpid()) + ".yaml")).string();
  {
    std::ofstream f(path);
    f << "system: {name: bench-stage}\ntopology: {sockets: 1}\ntiming_only: false\ndevices:\n"
      << "  - {name: gpu0, backend: emu, model: " << dir << "/devices/amd-mi210.yaml, socket: 0}\n";
  }
  auto sys = hw::System::from_config(hw::load_system_config(path));
  std::filesystem::remove(path);
  return sys;
}

[[noreturn]] void serve(int out_fd) {
  try {
    auto sys = one_gpu();
    const Model model = bench_model();
    std::vector<hw::Device*> devices(sys.devices().begin(), sys.devices().end());
    StageServer server(UcxContext::create(), {"127.0.0.1", 0},
                       [&](const std::string& n) { return n == "gcn" ? &model : nullptr; }, devices,
                       StageServerOptions{.host = "b"});
    const std::uint16_t port = server.port();
    if (write(out_fd, &port, sizeof port) != sizeof port) _exit(2);
    close(out_fd);
    server.run();  // the stage link, then the probe link; until killed
  } catch (const std::exception& e) {
    std::fprintf(stderr, "server: %s\n", e.what());
    _exit(3);
  }
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  rt::retain_freed_host_memory();  // as dype-serve does, in both processes (forked below)
  const int iters = std::stoi(arg(argc, argv, "--iters", "300"));
  const int warmup = std::stoi(arg(argc, argv, "--warmup", "20"));
  const std::int64_t rows = std::stoll(arg(argc, argv, "--rows", "4096"));
  const std::string tls = arg(argc, argv, "--transports", "tcp");
  if (tls != "default") setenv("UCX_TLS", tls.c_str(), 1);

  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(fds[0]);
    serve(fds[1]);
  }
  close(fds[1]);
  std::uint16_t port = 0;
  if (read(fds[0], &port, sizeof port) != sizeof port) {
    std::fprintf(stderr, "the stage server did not start (UCX unavailable?)\n");
    return 1;
  }
  close(fds[0]);

  const Model model = bench_model();
  // GCN's kernels: 0 SpMM, 1 GEMM. The GEMM stage needs no graph on the server.
  auto link = UcxStageLink::connect(UcxContext::create(), {"127.0.0.1", port}, model, "gcn", 1, 1, {"gpu0"});
  auto graph = Graph::from_edges(random_graph(rows, rows * 4, 5), true);
  const Request req = Request::gnn(graph, HostTensor::shape_only(rows, 64));
  const HostTensor x = make_tensor(rows, 64, kernels::generate_features(rows, 64, 9));
  std::vector<double> round_trip, stage, handoff;
  for (int i = 0; i < warmup + iters; ++i) {
    auto out = link->run(req, 0, static_cast<std::uint64_t>(i), 1, 1, std::span<const HostTensor>(&x, 1));
    if (out.size() != 1 || out[0].rows != rows) {
      std::fprintf(stderr, "unexpected answer\n");
      return 1;
    }
    if (i < warmup) continue;
    const auto s = link->stats();
    round_trip.push_back(s.last_round_trip_s * 1e6);
    stage.push_back(s.last_remote_stage_s * 1e6);
    handoff.push_back((s.last_round_trip_s - s.last_remote_stage_s) * 1e6 / 2.0);
  }
  link->close();
  const std::size_t bytes = static_cast<std::size_t>(rows * 64 * 4);
  remote::PathFit wire;
  for (int attempt = 0;; ++attempt) {
    try {
      wire = remote::probe_path(UcxContext::create(), {"127.0.0.1", port}, "", {64, bytes}, iters);
      break;
    } catch (const remote::ChannelError&) {
      if (attempt > 100) throw;
      usleep(20000);
    }
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  const double wire_us = (wire.points[1].median_s - wire.points[0].median_s / 2) * 1e6;
  const double mib = static_cast<double>(rows * 64 * 4) / (1 << 20);
  std::printf("remote stage over UCX_TLS=%s, %.2f MiB in and out, %d requests (measured, this machine, loopback)\n",
              tls.c_str(), mib, iters);
  std::printf("  round trip    median %8.1f us   p90 %8.1f us\n", percentile(round_trip, 0.5), percentile(round_trip, 0.9));
  std::printf("  remote stage  median %8.1f us   p90 %8.1f us\n", percentile(stage, 0.5), percentile(stage, 0.9));
  std::printf("  hand-off      median %8.1f us   p90 %8.1f us   (target <= 100 us median)\n", percentile(handoff, 0.5),
              percentile(handoff, 0.9));
  std::printf("  wire          median %8.1f us   (UCX alone, the same bytes one way, probe link)\n", wire_us);
  std::printf("  beyond wire   median %8.1f us   (hand-off - wire: what dype adds)\n", percentile(handoff, 0.5) - wire_us);
  return 0;
}
