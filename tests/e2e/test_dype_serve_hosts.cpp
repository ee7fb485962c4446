// dype-serve across hosts, as an operator runs it: two workers (`dype-serve --stage-server`, one
// with two emulated MI210s, one with two emulated U280s) and a coordinator whose system file lists
// them under `hosts` and whose own devices are not schedulable, so every stage of every plan runs on
// a worker, over UCX on loopback TCP. Answers over HTTP equal the CPU reference of the same seeded
// models; the workers' logs count the requests they served.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/daemon/engine_service.h"
#include "runtime/model.h"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include "../test_serve_hosts.h"
#include "../test_serve_process.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dype::test::Children;
using dype::test::read_all;
using dype::test::spawn_serve;
using json = nlohmann::json;
using namespace dype::test::hosts;

// Two workers (a: two emulated MI210s, b: two emulated U280s with the SpMM + GEMM image) and a
// coordinator that reaches them, all on ephemeral local ports.
class DypeServeHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kNoRemoteStages) GTEST_SKIP() << kNoRemoteStages;
    dir_ = dype::test::process_temp_dir("dype_serve_hosts");
    write(dir_ / "stage-token", "deployment-7f3a\n");
    write_worker_systems(dir_);
    int* stage_port = stage_port_;
    for (int w = 0; w < 2; ++w) {
      const fs::path ports = dir_ / ("ports-" + name(w) + ".json");
      fs::remove(log(w));
      worker_[w] = spawn_serve({"--stage-server", "127.0.0.1:0", "--host-name", name(w), "--system",
                                (dir_ / (name(w) + ".yaml")).string(), "--builtin-models", "--stage-token-file",
                                (dir_ / "stage-token").string()},
                               log(w), ports);
      children_.pids.push_back(worker_[w]);
      ASSERT_TRUE(fs::exists(ports)) << "worker " << name(w) << " did not start:\n" << read_all(log(w));
      stage_port[w] = json::parse(read_all(ports))["stage"];
    }
    std::string coord = "system: {name: two-workers}\ntopology: {sockets: 2}\nhosts:\n  - {name: here}\n";
    coord += "  - {name: a, address: \"127.0.0.1:" + std::to_string(stage_port[0]) + "\", nic_gbit_per_s: 100}\n";
    coord += "  - {name: b, address: \"127.0.0.1:" + std::to_string(stage_port[1]) + "\", nic_gbit_per_s: 100}\n";
    coord += "devices:\n" + cpu_line() + device_line("gpu0", "gpu", "a", 0) + device_line("gpu1", "gpu", "a", 0) +
             device_line("fpga0", "fpga", "b", 1) + device_line("fpga1", "fpga", "b", 1);
    write(dir_ / "coord.yaml", coord);
    write(dir_ / "token", "s3cret\n");
    const fs::path ports = dir_ / "ports.json";
    fs::remove(coord_log());
    coordinator_ = spawn_serve({"--system", (dir_ / "coord.yaml").string(), "--builtin-models", "--http-port", "0",
                                "--grpc-port", "-1", "--metrics-port", "-1", "--host-probe-secs", "0.2",
                                "--admin-token-file", (dir_ / "token").string(), "--stage-token-file",
                                (dir_ / "stage-token").string()},
                               coord_log(), ports);
    children_.pids.push_back(coordinator_);
    ASSERT_TRUE(fs::exists(ports)) << "the coordinator did not start:\n" << read_all(coord_log());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", json::parse(read_all(ports))["http"].get<int>());
    client_->set_read_timeout(60, 0);
  }

  static std::string name(int w) { return w == 0 ? "a" : "b"; }
  fs::path log(int w) const { return dir_ / (name(w) + ".log"); }
  fs::path coord_log() const { return dir_ / "coord.log"; }
  // The requests a worker's log says it served (written when it stops).
  std::int64_t served_by(int w) const { return stage_requests_served(read_all(log(w))); }

  // Starts worker w (again) on its stage port.
  void restart_worker(int w) {
    const fs::path ports = dir_ / ("ports-" + name(w) + ".json");
    worker_[w] = spawn_serve({"--stage-server", "127.0.0.1:" + std::to_string(stage_port_[w]), "--host-name", name(w),
                              "--system", (dir_ / (name(w) + ".yaml")).string(), "--builtin-models",
                              "--stage-token-file", (dir_ / "stage-token").string()},
                             log(w), ports);
    children_.pids.push_back(worker_[w]);
  }

  // GET /v2/dype/admin/devices: name -> the device's entry.
  std::map<std::string, json> devices() {
    auto r = client_->Get("/v2/dype/admin/devices", {{"Authorization", "Bearer s3cret"}});
    std::map<std::string, json> out;
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : std::string("no answer"));
    if (!r || r->status != 200) return out;
    const json body = json::parse(r->body);  // kept: a range-for over parse(...)["devices"] would dangle
    for (const json& d : body["devices"]) out[d["name"].get<std::string>()] = d;
    return out;
  }

  fs::path dir_;
  int stage_port_[2] = {0, 0};
  Children children_;
  pid_t worker_[2] = {-1, -1};
  pid_t coordinator_ = -1;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DypeServeHosts, CoordinatorAndTwoWorkersAnswerAsTheReference) {
  for (const std::string model : {"gcn", "gin"}) {
    const GnnCase c = gnn_case(model, 41);
    for (int round = 0; round < 3; ++round) {
      auto r = client_->Post(("/v2/models/" + model + "/infer").c_str(), c.body.dump(), "application/json");
      ASSERT_TRUE(r) << "no answer:\n" << read_all(coord_log());
      ASSERT_EQ(r->status, 200) << r->body << "\n" << read_all(coord_log());
      EXPECT_LE(dype::rt::relative_error(output_of(r->body), c.expect), 1e-5) << model << " round " << round;
    }
  }
  EXPECT_EQ(children_.stop(coordinator_), 0) << read_all(coord_log());
  for (int w = 0; w < 2; ++w) EXPECT_EQ(children_.stop(worker_[w]), 0) << read_all(log(w));
  EXPECT_GE(served_by(0) + served_by(1), 6) << "the workers served fewer stage requests than were sent";
}

// A worker killed mid-stream: the coordinator leaves its host out, re-plans on the other and runs
// the request that failed again; every request is answered once, right. Restarted on its address,
// the worker is found again and planned on.
TEST_F(DypeServeHosts, AWorkerKilledMidStreamLosesNothingAndIsUsedAgainWhenItRejoins) {
  const GnnCase c = gnn_case("gcn", 43);
  const int total = 30;
  int ok = 0;
  for (int i = 0; i < total; ++i) {
    if (i == 10) {
      ::kill(worker_[0], SIGKILL);
      std::erase(children_.pids, worker_[0]);
      ::waitpid(worker_[0], nullptr, 0);
    }
    auto r = client_->Post("/v2/models/gcn/infer", c.body.dump(), "application/json");
    ASSERT_TRUE(r) << "no answer to request " << i << ":\n" << read_all(coord_log());
    ASSERT_EQ(r->status, 200) << "request " << i << ": " << r->body << "\n" << read_all(coord_log());
    EXPECT_LE(dype::rt::relative_error(output_of(r->body), c.expect), 1e-5) << "request " << i;
    ++ok;
  }
  EXPECT_EQ(ok, total);
  // The admin API says where each device is and that host a's are left out.
  auto devs = devices();
  ASSERT_EQ(devs.count("gpu1"), 1u);
  EXPECT_EQ(devs["gpu1"]["host"], "a");
  EXPECT_EQ(devs["gpu1"]["address"], "127.0.0.1:" + std::to_string(stage_port_[0]));
  EXPECT_EQ(devs["gpu1"]["failed"], true);
  EXPECT_EQ(devs["fpga0"]["failed"], false);
  EXPECT_FALSE(devs["cpu0"].contains("host"));

  fs::remove(log(0));
  restart_worker(0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (read_all(coord_log()).find("host a (") == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(read_all(coord_log()).find("answers again"), std::string::npos) << read_all(coord_log());
  EXPECT_EQ(devices()["gpu0"]["failed"], false);
  for (int i = 0; i < 5; ++i) {
    auto r = client_->Post("/v2/models/gcn/infer", c.body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_LE(dype::rt::relative_error(output_of(r->body), c.expect), 1e-5) << "after the rejoin, request " << i;
  }
  const std::string text = read_all(coord_log());
  EXPECT_EQ(children_.stop(coordinator_), 0) << text;
  EXPECT_EQ(children_.stop(worker_[1]), 0) << read_all(log(1));
  EXPECT_EQ(children_.stop(worker_[0]), 0) << read_all(log(0));
  EXPECT_GE(served_by(1), 1) << "host b never ran a stage";
  EXPECT_GE(served_by(0), 5) << "host a was not planned on again after it rejoined:\n" << read_all(log(0));
}

// Workers serve only coordinators that present the deployment's stage token: one without it is
// refused at its first plan, the refusal names the token, and it exits 1 with nothing to serve.
TEST_F(DypeServeHosts, ACoordinatorWithoutTheStageTokenIsRefused) {
  const fs::path other_log = dir_ / "other.log";
  fs::remove(other_log);
  const pid_t other = spawn_serve({"--system", (dir_ / "coord.yaml").string(), "--builtin-models", "--http-port", "0", "--grpc-port", "-1",
                                   "--metrics-port", "-1"},
                                  other_log, dir_ / "other-ports.json", /*wait=*/false);
  children_.pids.push_back(other);
  int status = -1;
  for (int i = 0; i < 600 && ::waitpid(other, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::erase(children_.pids, other);
  const std::string text = read_all(other_log);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  EXPECT_NE(text.find("refused the stage: stage setup.token: does not match host"), std::string::npos) << text;
}

}  // namespace
