// Workers that join by themselves (dype-serve --join), as an operator runs them: a coordinator whose
// system file lists hosts a and b without addresses serves on its own CPU until they join; two
// workers report their devices and stage server addresses to it over gRPC with the stage token,
// and from then on it plans on them; answers equal the CPU reference. A worker killed while no
// request is in flight is found by its missing heartbeats and left out; restarted, it joins again
// and is used again. Joins without the token, or with other devices, are refused naming why,
// through a real gRPC client.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "runtime/daemon/proto/dype_admin.grpc.pb.h"
#include "../test_serve_hosts.h"
#include "../test_serve_process.h"
#include "../test_temp_dir.h"
#include "../test_tls_certs.h"

#include <httplib.h>  // after the project's headers: its resolv.h breaks Eigen

namespace {

namespace fs = std::filesystem;
using dype::test::Children;
using dype::test::read_all;
using dype::test::spawn_serve;
using json = nlohmann::json;
using namespace dype::test::hosts;

class DypeServeJoin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kNoRemoteStages) GTEST_SKIP() << kNoRemoteStages;
    dir_ = dype::test::process_temp_dir("dype_serve_join");
    write(dir_ / "stage-token", "deployment-join-51\n");
    write(dir_ / "token", "s3cret\n");
    write_worker_systems(dir_);
    // No addresses: both hosts join. The coordinator's CPU serves until they do.
    std::string coord = "system: {name: joining}\ntopology: {sockets: 2}\nhosts:\n  - {name: here}\n";
    coord += "  - {name: a, nic_gbit_per_s: 100}\n  - {name: b, nic_gbit_per_s: 100}\n";
    coord += "devices:\n" + cpu_line(true) + device_line("gpu0", "gpu", "a", 0) + device_line("gpu1", "gpu", "a", 0) +
             device_line("fpga0", "fpga", "b", 1) + device_line("fpga1", "fpga", "b", 1);
    write(dir_ / "coord.yaml", coord);
    const fs::path ports = dir_ / "ports.json";
    fs::remove(coord_log());
    coordinator_ = spawn_serve({"--system", (dir_ / "coord.yaml").string(), "--builtin-models", "--http-port", "0",
                                "--grpc-port", "0", "--metrics-port", "-1", "--host-probe-secs", "0.2",
                                "--host-timeout-secs", "1.5", "--admin-token-file", (dir_ / "token").string(),
                                "--stage-token-file", (dir_ / "stage-token").string(), "--no-warmup"},
                               coord_log(), ports);
    children_.pids.push_back(coordinator_);
    ASSERT_TRUE(fs::exists(ports)) << "the coordinator did not start:\n" << read_all(coord_log());
    const json p = json::parse(read_all(ports));
    grpc_port_ = p["grpc"].get<int>();
    http_port_ = p["http"].get<int>();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_port_);
    client_->set_read_timeout(60, 0);
  }

  static std::string name(int w) { return w == 0 ? "a" : "b"; }
  fs::path log(int w) const { return dir_ / (name(w) + ".log"); }
  fs::path coord_log() const { return dir_ / "coord.log"; }
  std::int64_t served_by(int w) const { return stage_requests_served(read_all(log(w))); }

  void start_worker(int w) {
    fs::remove(log(w));
    worker_[w] = spawn_serve({"--stage-server", "127.0.0.1:0", "--host-name", name(w), "--system",
                              (dir_ / (name(w) + ".yaml")).string(), "--builtin-models", "--stage-token-file",
                              (dir_ / "stage-token").string(), "--join", "127.0.0.1:" + std::to_string(grpc_port_),
                              "--join-interval-secs", "0.3"},
                             log(w), dir_ / ("ports-" + name(w) + ".json"));
    children_.pids.push_back(worker_[w]);
  }

  json hosts() {
    auto r = client_->Get("/v2/dype/admin/hosts", {{"Authorization", "Bearer s3cret"}});
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : std::string("no answer"));
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  }
  json host(const std::string& h) {
    const json all = hosts();
    if (all.contains("hosts"))
      for (const json& e : all["hosts"])
        if (e["name"] == h) return e;
    return json::object();
  }
  // Waits until `pred(host(h))` holds (10 s at most).
  template <typename P>
  bool wait_for(const std::string& h, P pred) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (pred(host(h))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::string plan(const std::string& model) {
    auto r = client_->Get(("/v2/dype/admin/plan?model=" + model).c_str(), {{"Authorization", "Bearer s3cret"}});
    return r && r->status == 200 ? r->body : "";
  }
  void expect_answers(const GnnCase& c, int n, const std::string& what) {
    for (int i = 0; i < n; ++i) {
      auto r = client_->Post("/v2/models/gcn/infer", c.body.dump(), "application/json");
      ASSERT_TRUE(r) << what << ": no answer\n" << read_all(coord_log());
      ASSERT_EQ(r->status, 200) << what << ": " << r->body << "\n" << read_all(coord_log());
      EXPECT_LE(dype::rt::relative_error(output_of(r->body), c.expect), 1e-5) << what << ", request " << i;
    }
  }
  grpc::Status join(const std::string& token, const std::string& host, const std::vector<std::array<std::string, 5>>& devices,
                    std::string* answer = nullptr) {
    auto stub = dype::admin::DypeAdmin::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    dype::admin::JoinRequest q;
    q.set_host(host);
    q.set_address("127.0.0.1:1");
    for (const auto& d : devices) {
      auto* j = q.add_devices();
      j->set_name(d[0]);
      j->set_kind(d[1]);
      j->set_product(d[2]);
      j->set_bitstream(d[3]);
      j->set_model(d[4]);
    }
    dype::admin::AdminResponse r;
    const grpc::Status st = stub->JoinHost(&ctx, q, &r);
    if (answer) *answer = r.json();
    return st;
  }

  fs::path dir_;
  int grpc_port_ = -1, http_port_ = -1;
  Children children_;
  pid_t worker_[2] = {-1, -1};
  pid_t coordinator_ = -1;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DypeServeJoin, WorkersJoinAreUsedAndRejoinAfterTheirHeartbeatStops) {
  const GnnCase c = gnn_case("gcn", 47);
  // Before any join: hosts listed, not joined, no address; the CPU answers.
  EXPECT_EQ(host("a")["joined"], false);
  EXPECT_TRUE(host("a")["address"].is_null());
  expect_answers(c, 2, "before the joins");
  EXPECT_EQ(plan("gcn").find("a/"), std::string::npos) << plan("gcn");

  start_worker(0);
  start_worker(1);
  for (const std::string h : {"a", "b"})
    ASSERT_TRUE(wait_for(h, [](const json& e) { return e.value("joined", false) && !e.value("failed", true); }))
        << h << " did not join: " << hosts().dump() << "\n" << read_all(log(h == "a" ? 0 : 1)) << "\n" << read_all(coord_log());
  EXPECT_NE(host("a")["address"].get<std::string>().rfind("127.0.0.1:", 0), std::string::npos);
  // Plans use the workers now.
  const auto planned = [&] {
    const std::string p = plan("gcn");
    return p.find("a/") != std::string::npos || p.find("b/") != std::string::npos;
  };
  for (int i = 0; i < 100 && !planned(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(planned()) << plan("gcn") << "\n" << read_all(coord_log());
  expect_answers(c, 6, "after the joins");

  // Worker a dies while nothing is in flight: its heartbeats stop, the coordinator leaves it out.
  ::kill(worker_[0], SIGKILL);
  std::erase(children_.pids, worker_[0]);
  ::waitpid(worker_[0], nullptr, 0);
  ASSERT_TRUE(wait_for("a", [](const json& e) { return e.value("failed", false); }))
      << hosts().dump() << "\n" << read_all(coord_log());
  for (int i = 0; i < 100 && plan("gcn").find("a/") != std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(plan("gcn").find("a/"), std::string::npos) << plan("gcn") << "\n" << read_all(coord_log());
  expect_answers(c, 4, "with host a gone");

  // Restarted, it joins again and is planned on again.
  start_worker(0);
  ASSERT_TRUE(wait_for("a", [](const json& e) { return !e.value("failed", true); })) << hosts().dump();
  expect_answers(c, 4, "after host a rejoined");

  // Drain host b through the admin API while two clients stream requests: its devices leave the
  // plans, undrain brings them back, and every request of the stream is answered once, right.
  std::atomic<bool> streaming{true};
  std::atomic<int> answered{0}, wrong{0};
  std::vector<std::thread> streams;
  for (int k = 0; k < 2; ++k) {
    streams.emplace_back([&] {
      httplib::Client cl("127.0.0.1", http_port_);
      cl.set_read_timeout(60, 0);
      while (streaming) {
        auto a = cl.Post("/v2/models/gcn/infer", c.body.dump(), "application/json");
        if (a && a->status == 200 && dype::rt::relative_error(output_of(a->body), c.expect) <= 1e-5) ++answered;
        else ++wrong;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r = client_->Post("/v2/dype/admin/hosts/b/drain", {{"Authorization", "Bearer s3cret"}}, "", "application/json");
  // No ASSERT until the streams are joined.
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  if (r && r->status == 200) {
    EXPECT_EQ(json::parse(r->body)["devices"], json({"fpga0", "fpga1"}));
  }
  EXPECT_EQ(host("b")["drained"], true);
  EXPECT_EQ(plan("gcn").find("b/"), std::string::npos) << plan("gcn");
  expect_answers(c, 2, "with host b drained");
  r = client_->Post("/v2/dype/admin/hosts/b/undrain", {{"Authorization", "Bearer s3cret"}}, "", "application/json");
  EXPECT_TRUE(r && r->status == 200);
  EXPECT_EQ(host("b")["drained"], false);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  streaming = false;
  for (auto& t : streams) t.join();
  EXPECT_EQ(wrong.load(), 0) << "requests lost or answered wrong across the host drain";
  EXPECT_GE(answered.load(), 4);
  r = client_->Post("/v2/dype/admin/hosts/nowhere/drain", {{"Authorization", "Bearer s3cret"}}, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;

  EXPECT_EQ(children_.stop(coordinator_), 0) << read_all(coord_log());
  EXPECT_NE(read_all(coord_log()).find("host a: no heartbeat"), std::string::npos) << read_all(coord_log());
  for (int w = 0; w < 2; ++w) EXPECT_EQ(children_.stop(worker_[w]), 0) << read_all(log(w));
  EXPECT_GE(served_by(0), 1) << "host a was not used after it rejoined:\n" << read_all(log(0));
}

// A coordinator whose gRPC is TLS (--tls-cert): a worker given the CA that signed it (--join-ca)
// joins; one given another CA never does (the handshake fails, the coordinator lists it not joined).
TEST_F(DypeServeJoin, AWorkerJoinsACoordinatorServingTlsWithItsCa) {
  const dype::test::TestPki& pki = dype::test::make_test_pki();
  if (!pki.ok) GTEST_SKIP() << pki.why;
  const fs::path ports = dir_ / "tls-ports.json", tls_log = dir_ / "tls-coord.log";
  const pid_t coord = spawn_serve({"--system", (dir_ / "coord.yaml").string(), "--builtin-models", "--http-port", "0",
                                   "--grpc-port", "0", "--metrics-port", "-1", "--admin-token-file",
                                   (dir_ / "token").string(), "--stage-token-file", (dir_ / "stage-token").string(),
                                   "--tls-cert", pki.server_cert.string(), "--tls-key", pki.server_key.string(),
                                   "--no-warmup"},
                                  tls_log, ports);
  children_.pids.push_back(coord);
  ASSERT_TRUE(fs::exists(ports)) << read_all(tls_log);
  const int port = json::parse(read_all(ports))["grpc"].get<int>();
  auto spawn_worker = [&](const std::string& host, const fs::path& ca) {
    const pid_t w = spawn_serve({"--stage-server", "127.0.0.1:0", "--host-name", host, "--system",
                                 (dir_ / (host + ".yaml")).string(), "--builtin-models", "--stage-token-file",
                                 (dir_ / "stage-token").string(), "--join", "localhost:" + std::to_string(port),
                                 "--join-ca", ca.string(), "--join-interval-secs", "0.3"},
                                dir_ / ("tls-" + host + ".log"), dir_ / ("tls-ports-" + host + ".json"));
    children_.pids.push_back(w);
    return w;
  };
  const pid_t good = spawn_worker("a", pki.ca), bad = spawn_worker("b", pki.other_ca);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_all(pki.ca);
  auto stub = dype::admin::DypeAdmin::NewStub(grpc::CreateChannel("localhost:" + std::to_string(port), grpc::SslCredentials(ssl)));
  auto joined = [&](const std::string& h) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer s3cret");
    dype::admin::AdminResponse r;
    if (!stub->Hosts(&ctx, dype::admin::AdminRequest{}, &r).ok()) return false;
    const json all = json::parse(r.json());
    for (const json& e : all["hosts"])
      if (e["name"] == h) return e["joined"].get<bool>();
    return false;
  };
  bool a = false;
  for (int i = 0; i < 200 && !(a = joined("a")); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(a) << "the worker with the coordinator's CA did not join";
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // three more heartbeats of b
  EXPECT_FALSE(joined("b")) << "a worker that does not trust the coordinator's certificate joined";
  EXPECT_EQ(children_.stop(good), 0);
  EXPECT_EQ(children_.stop(bad), 0);
  EXPECT_NE(read_all(dir_ / "tls-b.log").find("does not answer"), std::string::npos) << read_all(dir_ / "tls-b.log");
  EXPECT_EQ(children_.stop(coord), 0) << read_all(tls_log);
}

TEST_F(DypeServeJoin, HostileJoinsAreRefusedNamingWhy) {
  const std::array<std::string, 5> gpu0{"gpu0", "gpu", "AMD Instinct MI210", "", "amd-mi210"},
      gpu1{"gpu1", "gpu", "AMD Instinct MI210", "", "amd-mi210"};
  std::string answer;
  grpc::Status st = join("not-the-token", "a", {gpu0, gpu1});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("stage token"), std::string::npos) << st.error_message();
  st = join("deployment-join-51", "c", {gpu0});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("no host named 'c'"), std::string::npos) << st.error_message();
  st = join("deployment-join-51", "a", {gpu0});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("gpu1"), std::string::npos) << st.error_message();
  st = join("deployment-join-51", "a", {gpu0, {"gpu1", "fpga", "AMD Alveo U280", "u280-sextans-gemm", "xilinx-u280"}});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("gpu1'.kind"), std::string::npos) << st.error_message();
  st = join("deployment-join-51", "a", {gpu0, {"gpu1", "gpu", "NVIDIA A100", "", "nvidia-a100"}});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("gpu1'.model: the worker's is 'nvidia-a100'"), std::string::npos) << st.error_message();
  st = join("deployment-join-51", "b",
            {{"fpga0", "fpga", "AMD Alveo U280", "other-image", "xilinx-u280"},
             {"fpga1", "fpga", "AMD Alveo U280", "other-image", "xilinx-u280"}});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("bitstream"), std::string::npos) << st.error_message();
  // None of them joined anything, and the coordinator still serves.
  EXPECT_EQ(host("a")["joined"], false);
  EXPECT_EQ(host("b")["joined"], false);
  expect_answers(gnn_case("gcn", 5), 1, "after the refused joins");
  EXPECT_EQ(children_.stop(coordinator_), 0) << read_all(coord_log());
}

}  // namespace
