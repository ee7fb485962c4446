// Pipelines whose stages run in other processes (runtime/stage_link.h, runtime/remote/): a
// coordinator and two worker processes on loopback TCP (UCX_TLS=tcp), one owning two emulated
// MI210s and the other two emulated U280s, as the paper's testbed split over two hosts. Every cut
// of GCN, GIN and both transformers, with stages spread over the coordinator's own GPU and the
// workers' devices, answers as the single-device CPU reference does (within 1e-5); a worker that
// refuses a stage says why; a worker killed mid-stream fails its stage naming it, within a bounded
// time, and nothing hangs. Where UCX cannot start here, the tests skip and say why.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "runtime/remote/path_probe.h"
#include "runtime/remote/stage_server.h"
#include "runtime/remote/ucx_stage_link.h"
#include "../test_rt_requests.h"
#include "../unit/test_rt_common.h"

namespace dype::rt {
namespace {

using namespace std::chrono_literals;
using remote::HostPort;
using remote::UcxContext;

// The models both sides build from the same specs (same seeds: same weights, same digest).
std::map<std::string, Model> test_models() {
  std::map<std::string, Model> m;
  m.emplace("gcn", Model::gcn({.layers = 2, .in_features = 12, .hidden = 8, .seed = 5}));
  m.emplace("gin", Model::gin({.layers = 2, .in_features = 10, .hidden = 8, .gin_eps = 0.25f, .seed = 6}));
  m.emplace("swat", Model::transformer({.layers = 1, .d_model = 16, .heads = 2, .ffn = 24, .seed = 7}));
  m.emplace("encoder", Model::transformer({.layers = 1, .d_model = 16, .heads = 2, .ffn = 24, .residual_norm = true, .seed = 8}));
  return m;
}

// A worker process: `gpus` emulated GPUs and `fpgas` emulated FPGAs (with `bitstream`), two stage
// servers on 127.0.0.1 (their ports written to the pipe), serving links until killed.
struct Worker {
  pid_t pid = -1;
  std::uint16_t ports[2] = {0, 0};
  ~Worker() { kill_now(); }
  void kill_now() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
};

[[noreturn]] void worker_main(int out_fd, const std::string& host, int gpus, int fpgas, const std::string& bitstream) {
  try {
    setenv("UCX_TLS", "tcp", 1);
    auto sys = testing::emu_system(gpus, fpgas, false, bitstream);
    auto models = test_models();
    std::vector<hw::Device*> devices(sys.devices().begin(), sys.devices().end());
    auto ctx = UcxContext::create();
    auto find = [&](const std::string& name) -> const Model* {
      auto it = models.find(name);
      return it == models.end() ? nullptr : &it->second;
    };
    std::vector<std::unique_ptr<remote::StageServer>> servers;
    for (int i = 0; i < 2; ++i)
      servers.push_back(std::make_unique<remote::StageServer>(ctx, HostPort{"127.0.0.1", 0}, find, devices,
                                                              remote::StageServerOptions{.host = host, .token = "s3cret"}));
    std::uint16_t ports[2] = {servers[0]->port(), servers[1]->port()};
    if (write(out_fd, ports, sizeof ports) != sizeof ports) _exit(2);
    std::vector<std::thread> threads;
    for (auto& s : servers) {
      threads.emplace_back([&s] {
        for (;;) {
          try {
            s->serve();
          } catch (const std::exception&) {
            // Timed out waiting for a coordinator, or a coordinator failed: listen again.
          }
        }
      });
    }
    for (auto& t : threads) t.join();
  } catch (...) {
    _exit(3);
  }
  _exit(0);
}

// Forks a worker before this process starts UCX or any thread pool (each test runs in its own
// process under ctest, so the fork happens first thing).
bool start_worker(Worker& w, const std::string& host, int gpus, int fpgas, const std::string& bitstream) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  w.pid = fork();
  if (w.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    close(fds[0]);
    worker_main(fds[1], host, gpus, fpgas, bitstream);
  }
  close(fds[1]);
  const bool ok = read(fds[0], w.ports, sizeof w.ports) == sizeof w.ports;
  close(fds[0]);
  return ok;
}

// Connects a link, retrying while a worker (just forked or restarted) is not listening yet.
std::shared_ptr<remote::UcxStageLink> link_to(std::shared_ptr<UcxContext> ctx, std::uint16_t port, const Model& m,
                                              const std::string& name, int first, int last,
                                              const std::vector<std::string>& devices,
                                              const std::string& token = "s3cret") {
  const auto until = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    try {
      return remote::UcxStageLink::connect(ctx, {"127.0.0.1", port}, m, name, first, last, devices, {.timeout = 10s}, token);
    } catch (const remote::ChannelError&) {
      if (std::chrono::steady_clock::now() > until) throw;
      std::this_thread::sleep_for(20ms);
    }
  }
}

// Where a stage may run: the coordinator's own GPU, or a worker's server with some of its devices.
struct Slot {
  std::string name;  // "L", "a0", "a01", ...
  int worker = -1;   // -1: local; 0: worker a (GPUs); 1: worker b (FPGAs)
  int server = 0;
  std::vector<std::string> devices;
};

class RemoteStages : public ::testing::Test {
 protected:
  // Starts both workers; false (the test skips) when UCX cannot start here.
  bool start(const std::string& fpga_bitstream) {
    setenv("UCX_TLS", "tcp", 1);
    if (!start_worker(workers_[0], "a", 2, 0, "u280-sextans-gemm.yaml") ||
        !start_worker(workers_[1], "b", 0, 2, fpga_bitstream)) {
      why_ = "a worker process could not start UCX or its stage servers";
      return false;
    }
    try {
      ctx_ = UcxContext::create();
    } catch (const std::exception& e) {
      why_ = e.what();
      return false;
    }
    local_ = std::make_unique<hw::System>(testing::emu_system(1, 0));
    // The workers' devices, built here only to ask what they support.
    mirror_[0] = std::make_unique<hw::System>(testing::emu_system(2, 0));
    mirror_[1] = std::make_unique<hw::System>(testing::emu_system(0, 2, false, fpga_bitstream));
    return true;
  }

  bool supports(const Slot& slot, const Model& m, int first, int last) const {
    std::vector<hw::Device*> ds;
    if (slot.worker < 0) {
      ds = local_->devices_of(hw::DeviceKind::gpu);
    } else {
      for (hw::Device* d : mirror_[slot.worker]->devices())
        for (const auto& n : slot.devices)
          if (d->name() == n) ds.push_back(d);
    }
    for (hw::Device* d : ds)
      for (int k = first; k <= last; ++k)
        if (!d->supports(m.step(k).op)) return false;
    return true;
  }

  // Runs every cut of `name` over the slot patterns (each stage on the next slot of a pattern,
  // every slot of a pattern on other devices) and checks the answers against the reference.
  // Returns the plans checked.
  int check_every_cut(const std::string& name, const std::vector<Request>& reqs) {
    const auto models = test_models();
    const Model& m = models.at(name);
    const std::vector<std::vector<Slot>> patterns = {
        {{"a01", 0, 0, {"gpu0", "gpu1"}}, {"b01", 1, 0, {"fpga0", "fpga1"}}, {"L", -1, 0, {}}},
        {{"b0", 1, 0, {"fpga0"}}, {"a0", 0, 0, {"gpu0"}}, {"b1", 1, 1, {"fpga1"}}, {"a1", 0, 1, {"gpu1"}}},
        {{"L", -1, 0, {}}, {"a01", 0, 0, {"gpu0", "gpu1"}}, {"b01", 1, 0, {"fpga0", "fpga1"}}},
        {{"a0", 0, 0, {"gpu0"}}, {"L", -1, 0, {}}, {"a1", 0, 1, {"gpu1"}}, {"b0", 1, 0, {"fpga0"}}},
        {{"a01", 0, 0, {"gpu0", "gpu1"}}, {"L", -1, 0, {}}},
    };
    int checked = 0;
    for (const auto& split : testing::all_splits(m.num_kernels())) {
      for (const auto& pattern : patterns) {
        if (split.size() > pattern.size()) continue;
        bool ok = true;
        for (std::size_t s = 0; s < split.size(); ++s) ok = ok && supports(pattern[s], m, split[s].first, split[s].second);
        if (!ok) continue;
        PipelineSpec spec;
        for (std::size_t s = 0; s < split.size(); ++s) {
          PipelineStage st;
          st.first = split[s].first;
          st.last = split[s].second;
          const Slot& slot = pattern[s];
          if (slot.worker < 0) {
            st.devices = local_->devices_of(hw::DeviceKind::gpu);
          } else {
            st.remote = link_to(ctx_, workers_[slot.worker].ports[slot.server], m, name, st.first, st.last, slot.devices);
          }
          spec.stages.push_back(std::move(st));
        }
        const std::string what = name + " " + describe(spec);
        testing::expect_pipeline_matches_reference(m, std::move(spec), reqs, what, 1e-5);
        if (::testing::Test::HasFatalFailure()) return checked;
        ++checked;
      }
    }
    return checked;
  }

  Worker workers_[2];
  std::shared_ptr<UcxContext> ctx_;
  std::unique_ptr<hw::System> local_;
  std::unique_ptr<hw::System> mirror_[2];
  std::string why_;
};

#define START_OR_SKIP(bitstream) \
  if (!start(bitstream)) GTEST_SKIP() << "UCX cannot start here: " << why_

TEST_F(RemoteStages, GcnEveryCutOverTwoWorkersMatchesReference) {
  START_OR_SKIP("u280-sextans-gemm.yaml");
  const auto models = test_models();
  const int n = check_every_cut("gcn", testing::gnn_requests(models.at("gcn"), 97, 600, 3));
  EXPECT_GE(n, 16) << "plans checked";
}

TEST_F(RemoteStages, GinEveryCutOverTwoWorkersMatchesReference) {
  START_OR_SKIP("u280-sextans-gemm.yaml");
  const auto models = test_models();
  const int n = check_every_cut("gin", testing::gnn_requests(models.at("gin"), 61, 400, 3));
  EXPECT_GE(n, 16) << "plans checked";
}

TEST_F(RemoteStages, TransformerEveryCutWithAttentionOnRemoteFpgasMatchesReference) {
  START_OR_SKIP("u280-sextans-swat.yaml");
  const auto models = test_models();
  const int bare = check_every_cut("swat", testing::tf_requests(models.at("swat"), 40, 8, 2));
  // The encoder layer carries its skip tensor across stage cuts: those cross hosts as well.
  const int encoder = check_every_cut("encoder", testing::tf_requests(models.at("encoder"), 33, 6, 2));
  EXPECT_GE(bare, 16);
  EXPECT_GE(encoder, 16);
}

TEST_F(RemoteStages, NewGraphsTravelOnceAndAgainAfterTheServerLetThemGo) {
  START_OR_SKIP("u280-sextans-gemm.yaml");
  const auto models = test_models();
  const Model& m = models.at("gcn");
  // 20 graphs, each used twice in a row, then the first again: more graphs than the server keeps
  // (16), so the first has been evicted and must travel again.
  std::vector<Request> reqs;
  for (int g = 0; g < 20; ++g) {
    auto part = testing::gnn_requests(m, 30 + g, 120, 2, 500 + g);
    reqs.insert(reqs.end(), part.begin(), part.end());
  }
  reqs.push_back(reqs.front());
  PipelineSpec spec;
  PipelineStage local;
  local.first = 0;
  local.last = 1;
  local.devices = local_->devices_of(hw::DeviceKind::gpu);
  PipelineStage far;
  far.first = 2;
  far.last = 3;
  far.remote = link_to(ctx_, workers_[1].ports[0], m, "gcn", 2, 3, {"fpga0", "fpga1"});
  spec.stages = {local, far};
  testing::expect_pipeline_matches_reference(m, spec, reqs, "graphs over the link", 1e-5);
}

TEST_F(RemoteStages, AStageTheWorkerCannotRunIsRefusedNamingWhy) {
  START_OR_SKIP("u280-sextans-swat.yaml");
  const auto models = test_models();
  const Model& swat = models.at("swat");
  auto refusal = [&](const std::string& name, const Model& m, int first, int last, std::vector<std::string> devs,
                     const std::string& token = "s3cret") {
    try {
      link_to(ctx_, workers_[1].ports[0], m, name, first, last, devs, token);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // The swat image has no GEMM: the QKV kernel cannot run on the FPGA.
  EXPECT_NE(refusal("swat", swat, 0, 0, {"fpga0"}).find("cannot run"), std::string::npos);
  EXPECT_NE(refusal("swat", swat, 1, 1, {"gpu0"}).find("has no device 'gpu0'"), std::string::npos);
  EXPECT_NE(refusal("resnet", swat, 1, 1, {"fpga0"}).find("'resnet' is not served on host b"), std::string::npos);
  // Without the deployment's token, or with another, nothing else is looked at.
  EXPECT_NE(refusal("swat", swat, 1, 1, {"fpga0"}, "").find("stage setup.token: does not match host b's stage token"),
            std::string::npos);
  EXPECT_NE(refusal("swat", swat, 1, 1, {"fpga0"}, "s3creT").find("does not match"), std::string::npos);
  // Same name, other weights.
  const Model other = Model::transformer({.layers = 1, .d_model = 16, .heads = 2, .ffn = 24, .seed = 99});
  EXPECT_NE(refusal("swat", other, 1, 1, {"fpga0"}).find("other weights or kernels"), std::string::npos);
  // After the refusals the server still serves.
  auto ok = link_to(ctx_, workers_[1].ports[0], swat, "swat", 1, 1, {"fpga0"});
  EXPECT_EQ(ok->where(), "b/fpga0");
}

// dype-calibrate --peer's probe: the path to a stage server across sizes, fitted as NIC figures;
// without the token it is refused naming it, and the server still runs stages afterwards.
TEST_F(RemoteStages, APathProbeFitsTheLinkAndNeedsTheToken) {
  START_OR_SKIP("u280-sextans-swat.yaml");
  const std::vector<std::size_t> sizes{64, 4096, 65536, 1 << 20};
  remote::PathFit fit;
  for (int attempt = 0;; ++attempt) {  // the forked worker may still be starting its server
    try {
      fit = remote::probe_path(ctx_, {"127.0.0.1", workers_[1].ports[0]}, "s3cret", sizes, 5);
      break;
    } catch (const remote::ChannelError&) {
      if (attempt > 100) throw;
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_EQ(fit.where, "b");
  ASSERT_EQ(fit.points.size(), sizes.size());
  for (const auto& p : fit.points) EXPECT_GT(p.median_s, 0.0);
  EXPECT_GT(fit.points.back().median_s, fit.points.front().median_s) << "1 MiB took no longer than 64 bytes";
  EXPECT_GT(fit.bytes_per_s, 1e7) << "loopback below 10 MB/s";
  EXPECT_NEAR(fit.latency_per_end_s, fit.round_trip_s / 4, 1e-15);
  std::string refused;
  for (int attempt = 0; refused.empty() && attempt < 100; ++attempt) {
    try {
      remote::probe_path(ctx_, {"127.0.0.1", workers_[1].ports[0]}, "wrong", sizes, 1);
      refused = "(accepted)";
    } catch (const remote::ChannelError&) {
      std::this_thread::sleep_for(20ms);
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  EXPECT_NE(refused.find("stage probe.token: does not match host b's stage token"), std::string::npos) << refused;
  EXPECT_THROW(remote::probe_path(ctx_, {"127.0.0.1", workers_[1].ports[0]}, "s3cret", {64}, 1), InputError);
  const auto models = test_models();
  auto ok = link_to(ctx_, workers_[1].ports[0], models.at("swat"), "swat", 1, 1, {"fpga0"});
  EXPECT_EQ(ok->where(), "b/fpga0");
}

TEST_F(RemoteStages, AWorkerKilledMidStreamFailsItsStageNamingItAndNothingHangs) {
  START_OR_SKIP("u280-sextans-gemm.yaml");
  const auto models = test_models();
  const Model& m = models.at("gcn");
  PipelineSpec spec;
  PipelineStage first;
  first.first = 0;
  first.last = 1;
  first.remote = link_to(ctx_, workers_[0].ports[0], m, "gcn", 0, 1, {"gpu0", "gpu1"});
  PipelineStage second;
  second.first = 2;
  second.last = 3;
  second.devices = local_->devices_of(hw::DeviceKind::gpu);
  spec.stages = {first, second};
  auto reqs = testing::gnn_requests(m, 400, 3000, 1);
  const HostTensor expect = reference_forward(m, reqs[0]);
  std::mutex mu;
  std::vector<Completion> got;
  const int total = 60;
  const auto t0 = std::chrono::steady_clock::now();
  {
    Pipeline p(m, spec, {});
    for (int i = 0; i < total; ++i) {
      if (i == 20) workers_[0].kill_now();  // worker a dies with requests in flight
      p.submit({.seq = static_cast<std::uint64_t>(i), .request = std::make_shared<Request>(reqs[0]), .not_before_s = 0,
                .done = [&](Completion&& c) {
                  std::lock_guard lock(mu);
                  got.push_back(std::move(c));
                }});
    }
    p.close();
    p.join();
    ASSERT_EQ(p.dead_devices().size(), 1u);
    EXPECT_NE(p.dead_devices()[0].find("a/gpu0+gpu1"), std::string::npos) << p.dead_devices()[0];
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 15.0) << "the failure took too long to surface";
  // Every request is answered exactly once, in order: the ones before the kill with the right
  // output, the rest with an error naming the worker's stage (the engine re-plans and re-runs them).
  ASSERT_EQ(got.size(), static_cast<std::size_t>(total));
  int ok = 0;
  for (int i = 0; i < total; ++i) {
    EXPECT_EQ(got[i].seq, static_cast<std::uint64_t>(i));
    if (!got[i].error) {
      ++ok;
      EXPECT_LE(relative_error(got[i].output, expect), 1e-5);
    } else {
      EXPECT_EQ(got[i].failed_device, "a/gpu0+gpu1");
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_LT(ok, total);
}

}  // namespace
}  // namespace dype::rt
