// bench_ucx_handoff: host-side time of handing one activation from one process to another over
// UCX (runtime/remote/ucx_channel.h), the cross-host hand-off of issue 20 measured on loopback.
// Two processes (fork before either starts UCX): the child listens on 127.0.0.1 and echoes, the
// parent connects and measures. Per transport (UCX_TLS):
//
//   hand-off   the parent sends a rows x cols float32 activation (1 MiB by default: 1024 x 256)
//              and waits for the child's 1 x 1 acknowledgement, sent once recv() has returned the
//              whole activation; the time from send() to the acknowledgement is one hand-off
//              (payload one way + a small message back). Median and p99 over --iters.
//   ack only   the same with a 1 x 1 activation: the fixed cost inside each hand-off.
//   streamed   --iters activations sent back to back (window 8, no acknowledgement), the child
//              consuming them: time per activation once the pipeline is full (throughput, not
//              latency: consecutive hand-offs overlap, as between pipeline stages).
//
// Issue 20's target: <= 100 us median per 1 MB hand-off on loopback. Activations are built
// outside the timed region (a stage's output exists before it is handed off). Measured with
// both processes on this machine's cores (2 here), so sender, receiver and UCX's progress share
// them; the figures are this machine's, not a NIC's.
//
//   bench_ucx_handoff [--iters 2000] [--rows 1024] [--cols 256] [--transports "tcp;sm;default"] [--spin-us 0]
// (--transports: UCX_TLS values separated by ';', "default" for UCX's own choice.)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/host_memory.h"
#include "runtime/remote/ucx_channel.h"
#include "bench/bench_common.h"

using namespace dype;
using namespace dype::rt::remote;
using BenchClock = std::chrono::steady_clock;

namespace {

using bench::arg;
using bench::loadavg;

struct Config {
  int iters = 2000;
  int warmup = 200;
  std::uint32_t rows = 1024, cols = 256;
  std::chrono::microseconds spin{0};
};

// The child: accept, then echo a 1 x 1 acknowledgement for every activation of the two timed
// phases, then consume the streamed phase without answering. Exit status 0 on success.
int child_main(int port_fd, const Config& cfg, const std::string& tls) {
  try {
    rt::retain_freed_host_memory();
    auto ctx = UcxContext::create({.transports = tls, .spin = cfg.spin});
    UcxListener listener(ctx, {"127.0.0.1", 0});
    const std::uint16_t port = listener.port();
    if (write(port_fd, &port, sizeof port) != sizeof port) return 2;
    close(port_fd);
    UcxChannel ch = listener.accept();
    const std::vector<float> one(1, 1.0f);
    const int echoed = 2 * (cfg.warmup + cfg.iters);
    for (int i = 0; i < echoed; ++i) {
      auto a = ch.recv();
      if (!a) return 3;
      ch.send(Activation::copy_of(a->epoch(), a->seq(), 1, 1, one));
    }
    while (ch.recv()) {
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ucx_handoff child (%s): %s\n", tls.c_str(), e.what());
    return 1;
  }
}

// "cm rdmacm, tcp/lo.0, tcp/eth0.0": the transports of the endpoint's lanes, from UCX's own
// description, so each row says what actually carried the bytes (UCX_TLS allows, UCX chooses).
std::string lanes(const std::string& description) {
  std::string out;
  std::istringstream in(description);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("lane[");
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(line.find(':', at) + 1));
    std::string first, second;
    words >> first >> second;
    std::string lane = first == "cm" ? first + " " + second : first.substr(first.find(':') + 1);
    if (out.find(lane) == std::string::npos) out += (out.empty() ? "" : ", ") + lane;
  }
  return out;
}

struct Stats {
  double median_us = 0, p99_us = 0;
};

Stats stats(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

// Round trips of `rows x cols` out and 1 x 1 back; returns the timed ones in microseconds.
std::vector<double> round_trips(UcxChannel& ch, const Config& cfg, std::uint32_t rows,
                                std::uint32_t cols, std::uint64_t& seq) {
  std::vector<float> values(std::size_t{rows} * cols);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) * 0.5f;
  std::vector<double> us;
  for (int i = 0; i < cfg.warmup + cfg.iters; ++i) {
    Activation a = Activation::copy_of(0, seq, rows, cols, values);
    const auto t0 = BenchClock::now();
    ch.send(std::move(a));
    auto ack = ch.recv();
    const auto t1 = BenchClock::now();
    if (!ack || ack->seq() != seq) throw std::runtime_error("acknowledgement missing or out of order");
    ++seq;
    if (i >= cfg.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return us;
}

struct Result {
  std::string tls;
  bool ran = false;
  std::string error;
  Stats handoff, ack;
  double streamed_us = 0;
  std::string lanes;
};

Result run_transport(const Config& cfg, const std::string& tls) {
  Result r;
  r.tls = tls.empty() ? "default" : tls;
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    close(fds[0]);
    _exit(child_main(fds[1], cfg, tls));
  }
  close(fds[1]);
  std::uint16_t port = 0;
  const bool got_port = read(fds[0], &port, sizeof port) == sizeof port;
  close(fds[0]);
  try {
    if (!got_port) throw std::runtime_error("the child could not listen (see its message above)");
    auto ctx = UcxContext::create({.transports = tls, .spin = cfg.spin});
    UcxChannel ch = UcxChannel::connect(ctx, {"127.0.0.1", port});
    r.lanes = lanes(ch.describe());
    std::uint64_t seq = 0;
    r.handoff = stats(round_trips(ch, cfg, cfg.rows, cfg.cols, seq));
    r.ack = stats(round_trips(ch, cfg, 1, 1, seq));
    // Streamed: build the activations first, then time sending them all and the close, which
    // returns once the child has consumed every one.
    std::vector<float> values(std::size_t{cfg.rows} * cfg.cols, 0.25f);
    std::vector<Activation> batch;
    for (int i = 0; i < cfg.iters; ++i) batch.push_back(Activation::copy_of(0, seq++, cfg.rows, cfg.cols, values));
    const auto t0 = BenchClock::now();
    for (auto& a : batch) ch.send(std::move(a));
    ch.close();
    r.streamed_us = std::chrono::duration<double, std::micro>(BenchClock::now() - t0).count() / cfg.iters;
    r.ran = true;
  } catch (const std::exception& e) {
    r.error = e.what();
    kill(child, SIGKILL);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (r.ran && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    r.ran = false;
    r.error = "the child failed (status " + std::to_string(status) + ")";
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  cfg.iters = std::stoi(arg(argc, argv, "--iters", "2000"));
  cfg.warmup = std::max(10, cfg.iters / 10);
  cfg.rows = static_cast<std::uint32_t>(std::stoul(arg(argc, argv, "--rows", "1024")));
  cfg.cols = static_cast<std::uint32_t>(std::stoul(arg(argc, argv, "--cols", "256")));
  cfg.spin = std::chrono::microseconds(std::stoll(arg(argc, argv, "--spin-us", "0")));
  std::vector<std::string> transports;
  {
    std::stringstream ss(arg(argc, argv, "--transports", "tcp;sm;default"));
    for (std::string t; std::getline(ss, t, ';');) transports.push_back(t == "default" ? "" : t);
  }
  rt::retain_freed_host_memory();
  const double mib = static_cast<double>(cfg.rows) * cfg.cols * 4 / (1 << 20);
  std::printf("bench_ucx_handoff: %u x %u float32 (%.2f MiB) between two processes on 127.0.0.1, "
              "%d timed iterations (+%d warm-up), workers poll %lld us before sleeping; measured on this machine (%u hardware threads, "
              "load average %s)\n",
              cfg.rows, cfg.cols, mib, cfg.iters, cfg.warmup, static_cast<long long>(cfg.spin.count()), std::thread::hardware_concurrency(),
              loadavg().c_str());
  std::printf("%-9s %12s %10s %12s %14s %24s\n", "UCX_TLS", "hand-off", "p99", "ack only",
              "streamed", "target <= 100 us median");
  std::printf("%-9s %12s %10s %12s %14s\n", "", "median us", "us", "median us", "us/activation");
  for (const auto& tls : transports) {
    const Result r = run_transport(cfg, tls);
    if (!r.ran) {
      std::printf("%-9s not measured: %s\n", r.tls.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-9s %12.1f %10.1f %12.1f %14.1f %24s   lanes: %s\n", r.tls.c_str(), r.handoff.median_us,
                r.handoff.p99_us, r.ack.median_us, r.streamed_us,
                r.handoff.median_us <= 100.0 ? "met" : "missed", r.lanes.c_str());
  }
  std::printf("hand-off = 1 activation out + a 1 x 1 acknowledgement back (send() to ack recv()); "
              "all figures measured (wall clock), loopback only: no NIC, InfiniBand or GPUDirect.\n");
  return 0;
}
