// `dype-serve` as an operator runs it: the binary itself (the other daemon tests run its servers
// in-process), started on ephemeral ports, asked whether it is ready, stopped with SIGTERM; and
// refusing bad options with the option named.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <atomic>
#include <functional>
#include <random>
#include <set>
#include <map>
#include <memory>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../test_raw_http.h"
#include "../test_run_cli.h"
#include "../test_serve_process.h"
#include "../test_tls_certs.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
const std::string kExe = std::string(DYPE_BINARY_DIR) + "/apps/dype-serve";

using dype::test::read_all;
using dype::test::spawn_serve;

TEST(DypeServeCli, BadOptionsAreRefusedNamingTheOption) {
  const auto trim = dype::test::run_cli(kExe, "--trim-interval -1");
  EXPECT_NE(trim.status, 0);
  EXPECT_NE(trim.out.find("--trim-interval"), std::string::npos) << trim.out;
  const auto mode = dype::test::run_cli(kExe, "--mode fastest");
  EXPECT_NE(mode.status, 0);
  EXPECT_NE(mode.out.find("--mode"), std::string::npos) << mode.out;
  const auto batch = dype::test::run_cli(kExe, "--batch gcn=x --http-port 0 --grpc-port -1");
  EXPECT_EQ(batch.status, 1);
  EXPECT_NE(batch.out.find("--batch: 'gcn=x': MAX_SIZE 'x' is not a non-negative number"), std::string::npos) << batch.out;
  const std::string testbed = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  const auto unserved =
      dype::test::run_cli(kExe, "--system " + testbed + " --batch nosuch=8 --no-warmup --http-port 0 --grpc-port -1");
  EXPECT_EQ(unserved.status, 1);
  EXPECT_NE(unserved.out.find("nosuch"), std::string::npos) << unserved.out;
  const auto system = dype::test::run_cli(kExe, "--system /no/such/system.yaml --http-port 0 --grpc-port -1");
  EXPECT_EQ(system.status, 1);
  EXPECT_NE(system.out.find("/no/such/system.yaml"), std::string::npos) << system.out;
}

// --tls-cert and --tls-key: both or neither, readable PEM files, a key that is the certificate's;
// each refusal names its flag, before any model is loaded.
TEST(DypeServeCli, BadTlsOptionsAreRefusedNamingTheFlag) {
  const dype::test::TestPki& pki = dype::test::make_test_pki();
  if (!pki.ok) GTEST_SKIP() << pki.why;
  const std::string cert = pki.server_cert.string(), key = pki.server_key.string();
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--tls-cert " + cert, "--tls-key: required with --tls-cert"},
           {"--tls-key " + key, "--tls-cert: required with --tls-key"},
           {"--tls-cert /no/such.pem --tls-key " + key, "--tls-cert: cannot read '/no/such.pem'"},
           {"--tls-cert " + cert + " --tls-key /no/such.key", "--tls-key: cannot read '/no/such.key'"},
           {"--tls-cert " + key + " --tls-key " + key, "--tls-cert: '" + key + "' holds no PEM certificate"},
           {"--tls-cert " + cert + " --tls-key " + cert, "--tls-key: '" + cert + "' holds no unencrypted PEM private key"},
           {"--tls-cert " + cert + " --tls-key " + pki.other_key.string(), "is not the private key of the certificate"},
       }) {
    const auto r = dype::test::run_cli(kExe, c.args + " --builtin-models --no-warmup --http-port 0 --grpc-port -1");
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
}

// Starts dype-serve with `args` (plus ephemeral ports and a port file) in `cwd`, checks it answers
// ready, /v2/models (listing each of `served`) and /metrics, then that it exits 0 on SIGTERM, and
// that its log says each of `logged`. `before_stop(http_port)` runs just before the SIGTERM, which
// must end the process within `max_stop_s`.
void serve_and_stop(const std::vector<std::string>& args, const std::string& cwd,
                    const std::vector<std::string>& served = {"gcn"}, const std::vector<std::string>& logged = {},
                    const std::function<void(int)>& before_stop = {}, double max_stop_s = 30.0) {
  const fs::path dir = dype::test::process_temp_dir("dype_serve_cli");
  const fs::path ports = dir / "ports.json", log = dir / "serve.log";
  fs::remove(ports);
  std::vector<std::string> argv_s = {kExe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  for (const char* a : {"--http-port", "0", "--grpc-port", "-1", "--metrics-port", "0", "--port-file"}) argv_s.push_back(a);
  argv_s.push_back(ports.string());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string out = log.string();
    // One open file for both streams, so neither overwrites the other's lines.
    if (!freopen(out.c_str(), "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(126);
    if (chdir(cwd.c_str()) != 0) _exit(125);
    execv(kExe.c_str(), argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(ports) && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0) << "dype-serve exited early:\n" << read_all(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(ports)) << "no port file after 60 s:\n" << read_all(log);
  const auto j = nlohmann::json::parse(read_all(ports));
  EXPECT_EQ(j["grpc"], -1);
  // With --tls-cert (the test PKI's server certificate) the HTTP port speaks HTTPS.
  const bool tls = std::find(args.begin(), args.end(), "--tls-cert") != args.end();
  httplib::Client http((tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(j["http"].get<int>()));
  if (tls) {
    http.set_ca_cert_path(dype::test::make_test_pki().ca.string());
    http.enable_server_certificate_verification(true);
  }
  const auto ready = http.Get("/v2/health/ready");
  ASSERT_TRUE(ready) << "no HTTP answer";
  EXPECT_EQ(ready->status, 200) << ready->body;
  const auto models = http.Get("/v2/models");
  ASSERT_TRUE(models);
  for (const std::string& name : served)
    EXPECT_NE(models->body.find("\"" + name + "\""), std::string::npos) << models->body;
  httplib::Client metrics("127.0.0.1", j["metrics"].get<int>());
  const auto m = metrics.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a few trims while idle
  if (before_stop) before_stop(j["http"].get<int>());

  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  pid_t done = 0;
  const auto stop_deadline = sent + std::chrono::milliseconds(static_cast<int>(max_stop_s * 1000));
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < stop_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "dype-serve did not stop within " << max_stop_s << " s of SIGTERM:\n" << read_all(log);
  }
  ASSERT_TRUE(WIFEXITED(status)) << read_all(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_all(log);
  for (const std::string& line : logged) EXPECT_NE(read_all(log).find(line), std::string::npos) << read_all(log);
}

TEST(DypeServeCli, ServesAndStopsCleanlyOnSigterm) {
  const std::string system = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  // A short trim interval runs the main thread's malloc_trim loop several times.
  serve_and_stop({"--system", system, "--mode", "balanced", "--trim-interval", "0.05", "--builtin-models"},
                 fs::temp_directory_path().string(), {"gcn", "gin", "swin-transformer", "karate-gcn", "karate-gin"},
                 {"model gcn warmed up in", "model swin-transformer warmed up in", "model karate-sage warmed up in"});
}

// Slow and idle clients attached (an idle keep-alive connection, headers half sent, a body half
// sent, each far inside its timeout) do not hold up a SIGTERM: the process exits 0 within
// --exit-timeout + 1 s. (Before the event-driven transport, one slow client kept it running 45 s.)
TEST(DypeServeCli, SigtermWithSlowClientsAttachedExitsWithinTheExitTimeout) {
  const std::string system = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  std::vector<std::unique_ptr<dype::test::RawConnection>> clients;
  auto attach = [&](int port) {
    for (int i = 0; i < 20; ++i) {
      clients.push_back(std::make_unique<dype::test::RawConnection>(port));
      if (i % 3 == 1) clients.back()->send_all("GET /v2/health/ready HTTP/1.1\r\nHo");
      if (i % 3 == 2)
        clients.back()->send_all("POST /v2/models/gcn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"in");
    }
  };
  serve_and_stop({"--system", system, "--exit-timeout", "2", "--header-timeout", "60", "--body-timeout", "60", "--batch", "8/200",
                  "--idle-timeout", "60"},
                 fs::temp_directory_path().string(), {"karate-gcn"}, {"dynamic batching for every GNN model: up to 8 requests, 200 us queue delay", "dype-serve: stopped"}, attach, 3.0);
  for (auto& c : clients) EXPECT_TRUE(c->closed_by_server());
}

// --tls-cert/--tls-key: HTTPS answers (the metrics port stays plain), and SIGTERM still stops the
// daemon at once with TLS connections open in every state: idle after a request, mid-handshake,
// never handshaking.
TEST(DypeServeCli, ServesHttpsAndStopsOnSigterm) {
  const dype::test::TestPki& pki = dype::test::make_test_pki();
  if (!pki.ok) GTEST_SKIP() << pki.why;
  const std::string system = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  std::vector<std::unique_ptr<dype::test::RawConnection>> raw;
  std::unique_ptr<httplib::Client> idle;
  auto attach = [&](int port) {
    idle = std::make_unique<httplib::Client>("https://127.0.0.1:" + std::to_string(port));
    idle->set_ca_cert_path(pki.ca.string());
    idle->set_keep_alive(true);
    const auto r = idle->Get("/v2/health/live");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    raw.push_back(std::make_unique<dype::test::RawConnection>(port));
    raw.push_back(std::make_unique<dype::test::RawConnection>(port));
    raw.back()->send_all(std::string("\x16\x03\x01\x02\x00\x01", 6));  // a ClientHello's first bytes
  };
  serve_and_stop({"--system", system, "--builtin-models", "--no-warmup", "--header-timeout", "60", "--tls-cert",
                  pki.server_cert.string(), "--tls-key", pki.server_key.string()},
                 fs::temp_directory_path().string(), {"gcn"}, {"HTTPS on 127.0.0.1", "dype-serve: stopped"}, attach, 5.0);
  for (auto& c : raw) EXPECT_TRUE(c->closed_by_server());
}

// The first command a new user types: no --system, so the host is detected, and no models, so the
// example repository is served. On a machine with only a CPU the detected CPU carries the generic
// CPU profile and serves every model (it used to exit 1: "no device kind available to the
// scheduler can run kernel 0").
TEST(DypeServeCli, BareCommandServesTheExampleRepositoryOnTheDetectedHost) {
  serve_and_stop({}, DYPE_SOURCE_DIR, {"karate-gcn", "karate-gin"}, {"model karate-gcn version 1 (gcn)"});
}

// A model repository: its models are served with their versions; one that cannot be loaded is
// reported by name with the reason, and the others still serve.
TEST(DypeServeCli, ServesAModelRepositoryBesideAModelThatCannotLoad) {
  const fs::path repo = dype::test::process_temp_dir("dype_serve_repo") / "models";
  fs::remove_all(repo);
  fs::create_directories(repo);
  fs::copy(std::string(DYPE_SOURCE_DIR) + "/models/karate-gcn", repo / "karate-gcn", fs::copy_options::recursive);
  fs::create_directories(repo / "broken");
  std::ofstream(repo / "broken" / "config.yaml") << "family: gcn\nin_features: 34\nhidden: 16\nlayers: 2\nactivation: swish\n";
  const std::string system = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  serve_and_stop({"--system", system, "--model-repository", repo.string()}, fs::temp_directory_path().string(),
                 {"karate-gcn"},
                 {"model 'broken' not served", "activation: 'swish' is not a kernel epilogue",
                  "model karate-gcn version 1 (gcn)"});
}

// tritonserver's model control: explicit serves only the --load-model models at start.
TEST(DypeServeCli, ExplicitModelControlServesTheNamedModels) {
  const std::string system = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  serve_and_stop({"--system", system, "--model-control-mode", "explicit", "--load-model", "karate-gin"},
                 fs::temp_directory_path().string(), {"karate-gin"}, {"model karate-gin version 1 (gin)"});
  const auto r = dype::test::run_cli(kExe, "--load-model karate-gin --http-port 0 --grpc-port -1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--load-model: needs --model-control-mode explicit"), std::string::npos) << r.out;
}


// --state-dir: the operator's changes survive SIGKILL. Mode, a drained GPU and a swapped FPGA image
// are set over the admin API, the daemon is killed with no chance to save anything more, and the
// restarted daemon comes back with all three.
TEST(DypeServeCli, OperatorStateSurvivesSigkill) {
  const fs::path dir = dype::test::process_temp_dir("dype_serve_state");
  const fs::path state = dir / "state", token = dir / "token", ports = dir / "ports.json", log = dir / "serve.log";
  fs::remove_all(state);
  std::ofstream(token) << "s3cret\n";
  const std::string src = DYPE_SOURCE_DIR;
  auto start = [&]() {
    return spawn_serve({"--system", src + "/configs/systems/paper-testbed-pcie4.yaml", "--builtin-models", "--state-dir",
                        state.string(), "--admin-token-file", token.string(), "--bitstream-dir", src + "/configs/bitstreams",
                        "--http-port", "0", "--grpc-port", "-1", "--metrics-port", "-1"},
                       log, ports);
  };
  pid_t pid = start();
  ASSERT_TRUE(fs::exists(ports)) << read_all(log);
  int port = nlohmann::json::parse(read_all(ports))["http"];
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  {
    httplib::Client c("127.0.0.1", port);
    auto mode = c.Post("/v2/dype/admin/mode", auth, R"({"mode": "energy"})", "application/json");
    ASSERT_TRUE(mode);
    ASSERT_EQ(mode->status, 200) << mode->body;
    auto drain = c.Post("/v2/dype/admin/devices/gpu1/drain", auth, "", "application/json");
    ASSERT_TRUE(drain);
    ASSERT_EQ(drain->status, 200) << drain->body;
    auto load = c.Post("/v2/dype/admin/bitstreams/load", auth, R"({"device": "fpga0", "path": "u280-sextans-gemm.yaml"})",
                       "application/json");
    ASSERT_TRUE(load);
    ASSERT_EQ(load->status, 200) << load->body;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);

  pid = start();
  ASSERT_TRUE(fs::exists(ports)) << read_all(log);
  port = nlohmann::json::parse(read_all(ports))["http"];
  httplib::Client c("127.0.0.1", port);
  const auto plan = c.Get("/v2/dype/admin/plan", auth);
  ASSERT_TRUE(plan);
  EXPECT_EQ(nlohmann::json::parse(plan->body)["mode"], "energy") << plan->body;
  const auto devices = c.Get("/v2/dype/admin/devices", auth);
  ASSERT_TRUE(devices);
  const nlohmann::json d = nlohmann::json::parse(devices->body);
  bool gpu1_drained = false, fpga0_gemm = false;
  for (const auto& dev : d["devices"]) {
    if (dev["name"] == "gpu1") gpu1_drained = dev["drained"].get<bool>();
    if (dev["name"] == "fpga0") fpga0_gemm = dev["bitstream"] == "u280-sextans-gemm";
  }
  EXPECT_TRUE(gpu1_drained) << d.dump();
  EXPECT_TRUE(fpga0_gemm) << d.dump();
  EXPECT_NE(read_all(log).find("state restored: gpu1: drained"), std::string::npos) << read_all(log);
  kill(pid, SIGTERM);
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_all(log);
}

// --state-dir: a graph registered with its features and updated comes back after SIGKILL at its
// last version, under the same id, answering the same as before the kill.
TEST(DypeServeCli, UpdatedGraphSurvivesSigkill) {
  const fs::path dir = dype::test::process_temp_dir("dype_serve_graphs");
  const fs::path state = dir / "state", ports = dir / "ports.json", log = dir / "serve.log";
  fs::remove_all(state);
  const std::string src = DYPE_SOURCE_DIR;
  auto start = [&]() {
    return spawn_serve({"--system", src + "/configs/systems/paper-testbed-pcie4.yaml", "--builtin-models", "--state-dir",
                        state.string(), "--http-port", "0", "--grpc-port", "-1", "--metrics-port", "-1"},
                       log, ports);
  };
  pid_t pid = start();
  ASSERT_TRUE(fs::exists(ports)) << read_all(log);
  using nlohmann::json;
  auto client = [&] { return httplib::Client("127.0.0.1", json::parse(read_all(ports))["http"].get<int>()); };
  const int nodes = 50;
  std::vector<float> x(nodes * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  std::vector<std::int64_t> ei;
  for (int i = 0; i < nodes; ++i) ei.push_back(i);
  for (int i = 0; i < nodes; ++i) ei.push_back((i + 1) % nodes);
  const json reg = {{"inputs", {{{"name", "edge_index"}, {"datatype", "INT64"}, {"shape", {2, nodes}}, {"data", ei}},
                                {{"name", "x"}, {"datatype", "FP32"}, {"shape", {nodes, 64}}, {"data", x}}}}};
  auto c = client();
  auto r = c.Post("/v2/dype/graphs", reg.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string id = json::parse(r->body)["id"];
  for (int i = 0; i < 3; ++i) {
    const json u = {{"inputs", {{{"name", "add_edges"}, {"datatype", "INT64"}, {"shape", {2, 1}}, {"data", {i, 20 + i}}}}}};
    auto a = c.Post(("/v2/dype/graphs/" + id + "/update").c_str(), u.dump(), "application/json");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->status, 200) << a->body;
  }
  const std::string ask = json{{"parameters", {{"graph_id", id}, {"graph_version", 3}}}, {"inputs", json::array()}}.dump();
  auto before = c.Post("/v2/models/gcn/infer", ask, "application/json");
  ASSERT_TRUE(before);
  ASSERT_EQ(before->status, 200) << before->body;
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);

  pid = start();
  ASSERT_TRUE(fs::exists(ports)) << read_all(log);
  EXPECT_NE(read_all(log).find("state restored: graph " + id + " restored at version 3: 50 nodes, 53 edges"),
            std::string::npos) << read_all(log);
  auto c2 = client();
  auto after = c2.Post("/v2/models/gcn/infer", ask, "application/json");
  ASSERT_TRUE(after);
  ASSERT_EQ(after->status, 200) << after->body;
  EXPECT_EQ(json::parse(after->body)["outputs"], json::parse(before->body)["outputs"]);
  kill(pid, SIGTERM);
  waitpid(pid, &status, 0);
}

// Crash consistency: while a client streams requests and the operator changes mode, drains and
// undrains GPUs and swaps fpga0's image, the daemon is SIGKILLed at a random point (seeded,
// printed), and again at a random point of the next start (while it loads models and restores the
// state). The restarted daemon's state is the last change the operator saw acknowledged, or the one
// in flight when the kill came (committed before its answer), never a mix or a damaged file; the
// refined performance models saved every 0.1 s are never damaged either.
TEST(DypeServeCli, StateAfterSigkillAtRandomPointsIsTheLastCommitted) {
  const fs::path dir = dype::test::process_temp_dir("dype_serve_crash");
  const fs::path state = dir / "state", token = dir / "token", ports = dir / "ports.json", log = dir / "serve.log";
  fs::remove_all(state);
  fs::remove(log);
  std::ofstream(token) << "s3cret\n";
  const std::string src = DYPE_SOURCE_DIR;
  auto start = [&](bool wait = true) {
    return spawn_serve({"--system", src + "/configs/systems/paper-testbed-pcie4.yaml", "--builtin-models", "--state-dir",
                        state.string(), "--refined-save-secs", "0.1", "--admin-token-file", token.string(),
                        "--bitstream-dir", src + "/configs/bitstreams", "--perfmodels", src + "/configs/perfmodels",
                        "--no-warmup", "--http-port", "0", "--grpc-port", "-1", "--metrics-port", "-1"},
                       log, ports, wait);
  };
  struct OpState {
    std::string mode = "perf";
    std::set<std::string> drained;
    std::string image = "u280-sextans-swat";
    bool operator==(const OpState&) const = default;
    std::string text() const {
      std::string d;
      for (const auto& x : drained) d += x + " ";
      return "mode " + mode + ", drained {" + d + "}, fpga0 " + image;
    }
  };
  const httplib::Headers auth{{"Authorization", "Bearer s3cret"}};
  auto read_state = [&](httplib::Client& c) {
    OpState s;
    const auto plan = c.Get("/v2/dype/admin/plan", auth);
    const auto devices = c.Get("/v2/dype/admin/devices", auth);
    if (!plan || !devices || plan->status != 200 || devices->status != 200) {
      ADD_FAILURE() << "admin API did not answer after a restart: plan "
                    << (plan ? std::to_string(plan->status) + " " + plan->body : httplib::to_string(plan.error()))
                    << "; devices "
                    << (devices ? std::to_string(devices->status) + " " + devices->body
                                : httplib::to_string(devices.error()));
      return s;
    }
    s.mode = nlohmann::json::parse(plan->body)["mode"];
    const nlohmann::json listed = nlohmann::json::parse(devices->body);  // a named value: the loop holds a reference
    for (const auto& dev : listed["devices"]) {
      if (dev["drained"].get<bool>()) s.drained.insert(dev["name"].get<std::string>());
      if (dev["name"] == "fpga0") s.image = dev["bitstream"].get<std::string>();
    }
    return s;
  };

  const unsigned seed = static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  OpState acked;  // what the last acknowledged change left
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      // Killed while starting: reading the state, restoring it, loading models. Nothing changes.
      const pid_t early = start(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 1500)(rng)));
      kill(early, SIGKILL);
      int st = 0;
      waitpid(early, &st, 0);
    }
    const pid_t pid = start();
    dype::test::Children guard{{pid}};  // killed and reaped if the test leaves early
    ASSERT_TRUE(fs::exists(ports)) << read_all(log);
    const int port = nlohmann::json::parse(read_all(ports))["http"];
    {
      httplib::Client c("127.0.0.1", port);
      ASSERT_EQ(read_state(c), acked) << "round " << round << ": restarted with " << read_state(c).text()
                                      << ", last acknowledged " << acked.text() << "\n" << read_all(log);
    }
    // A client streams while the operator works; the kill comes at a random point.
    std::atomic<bool> stop{false};
    std::thread client([&] {
      httplib::Client c("127.0.0.1", port);
      const std::string body = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3,64],"data":[)" +
                               [] {
                                 std::string d;
                                 for (int i = 0; i < 192; ++i) d += (i ? "," : "") + std::to_string(i % 7);
                                 return d;
                               }() +
                               R"(]},{"name":"edge_index","datatype":"INT64","shape":[2,3],"data":[0,1,2,1,2,0]}]})";
      while (!stop) c.Post("/v2/models/gcn/infer", body, "application/json");
    });
    const int kill_after_ms = std::uniform_int_distribution<int>(50, 1500)(rng);
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
      kill(pid, SIGKILL);
    });
    OpState pending = acked;
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(5, 0);
    for (int step = 0;; ++step) {
      pending = acked;
      const httplib::Result r = [&]() {
        switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
          case 0: {
            static const char* modes[] = {"perf", "energy", "balanced"};
            pending.mode = modes[std::uniform_int_distribution<int>(0, 2)(rng)];
            return c.Post("/v2/dype/admin/mode", auth, R"({"mode": ")" + pending.mode + "\"}", "application/json");
          }
          case 1: {
            const std::string gpu = std::uniform_int_distribution<int>(0, 1)(rng) ? "gpu1" : "gpu0";
            const bool drain = !acked.drained.count(gpu) && acked.drained.empty();  // keep one GPU in service
            if (drain) pending.drained.insert(gpu);
            else pending.drained.erase(gpu);
            return c.Post("/v2/dype/admin/devices/" + gpu + (drain ? "/drain" : "/undrain"), auth, "", "application/json");
          }
          default:
            pending.image = acked.image == "u280-sextans-swat" ? "u280-sextans-gemm" : "u280-sextans-swat";
            return c.Post("/v2/dype/admin/bitstreams/load", auth,
                          R"({"device": "fpga0", "path": ")" + pending.image + ".yaml\"}", "application/json");
        }
      }();
      if (!r) break;  // killed: this change may or may not have been committed
      if (r->status != 200) {  // not an ASSERT: the client and killer threads must be joined
        ADD_FAILURE() << r->body;
        break;
      }
      acked = pending;
    }
    killer.join();
    stop = true;
    client.join();
    int status = 0;
    waitpid(pid, &status, 0);
    guard.pids.clear();  // reaped above
    ASSERT_TRUE(WIFSIGNALED(status)) << read_all(log);
    // Restarted: the acknowledged state, or the one in flight.
    const pid_t again = start();
    dype::test::Children guard_again{{again}};
    ASSERT_TRUE(fs::exists(ports)) << read_all(log);
    {
      httplib::Client c2("127.0.0.1", nlohmann::json::parse(read_all(ports))["http"].get<int>());
      const OpState now = read_state(c2);
      EXPECT_TRUE(now == acked || now == pending)
          << "round " << round << " (killed after " << kill_after_ms << " ms): restarted with " << now.text()
          << "; last acknowledged " << acked.text() << ", in flight " << pending.text() << "\n"
          << "state.json: " << read_all(state / "state.json");
      acked = now;
    }
    const std::string text = read_all(log);
    EXPECT_EQ(text.find("refined models ignored"), std::string::npos) << text;
    EXPECT_EQ(text.find("not valid JSON"), std::string::npos) << text;
    kill(again, SIGTERM);
    waitpid(again, &status, 0);
    guard_again.pids.clear();  // reaped above
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  }
  EXPECT_NE(read_all(log).find("refinement restored ("), std::string::npos) << read_all(log);
}

TEST(DypeServeCli, ARepositoryWithNothingServableExits1) {
  const fs::path repo = dype::test::process_temp_dir("dype_serve_repo") / "empty";
  fs::create_directories(repo);
  const auto r = dype::test::run_cli(kExe, "--model-repository " + repo.string() + " --http-port 0 --grpc-port -1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--model-repository: no model could be loaded"), std::string::npos) << r.out;
}

// --receive-pool-mb: large payloads (here x of a 5000-node graph with the built-in GCN's 64
// features, 1.28 MB, over HTTP's binary extension and gRPC's raw contents) are received into
// buffers kept for the next request, as /metrics counts them; with 0 none is kept.
TEST(DypeServeCli, ReceivePoolKeepsLargePayloadBuffersUnlessToldNot) {
  const fs::path dir = dype::test::process_temp_dir("dype_serve_receive_pool");
  const fs::path graph = dir / "ring.mtx", ports = dir / "ports.json", log = dir / "serve.log";
  {
    std::ofstream g(graph);
    constexpr int kNodes = 5000;
    g << "%%MatrixMarket matrix coordinate pattern general\n" << kNodes << " " << kNodes << " " << kNodes << "\n";
    for (int i = 1; i <= kNodes; ++i) g << i << " " << (i % kNodes) + 1 << "\n";
  }
  const std::string client = std::string(DYPE_BINARY_DIR) + "/apps/dype-client";
  // The receive-buffer lines of /metrics after two requests over each protocol.
  auto counters_after_requests = [&](const std::string& pool_mb) {
    dype::test::Children children;
    const pid_t pid = spawn_serve({"--system", std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml",
                                   "--builtin-models", "--no-warmup", "--receive-pool-mb", pool_mb, "--http-port", "0",
                                   "--grpc-port", "0", "--metrics-port", "0"},
                                  log, ports);
    children.pids.push_back(pid);
    std::map<std::string, double> got;
    if (!fs::exists(ports)) {
      ADD_FAILURE() << "dype-serve did not start:\n" << read_all(log);
      return got;
    }
    const auto j = nlohmann::json::parse(read_all(ports));
    const std::string where = "--http-port " + std::to_string(j["http"].get<int>()) + " --grpc-port " +
                              std::to_string(j["grpc"].get<int>()) + " --metrics-port " +
                              std::to_string(j["metrics"].get<int>());
    for (const char* protocol : {"http", "grpc", "http", "grpc"}) {
      const auto r = dype::test::run_cli(client, where + " --protocol " + protocol + " infer --model gcn --mtx " +
                                                     graph.string());
      EXPECT_EQ(r.status, 0) << r.out;
    }
    httplib::Client metrics("127.0.0.1", j["metrics"].get<int>());
    const auto m = metrics.Get("/metrics");
    if (!m) {
      ADD_FAILURE() << "no /metrics";
      return got;
    }
    std::istringstream lines(m->body);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("dype_receive_buffer", 0) == 0) got[line.substr(0, line.rfind(' '))] = std::stod(line.substr(line.rfind(' ') + 1));
    EXPECT_EQ(children.stop(pid), 0) << read_all(log);
    children.pids.clear();
    return got;
  };
  const std::string reused = R"(dype_receive_buffers_total{source="reused"})",
                    allocated = R"(dype_receive_buffers_total{source="allocated"})",
                    free = R"(dype_receive_buffer_bytes{state="free"})";
  std::map<std::string, double> kept = counters_after_requests("64");
  ASSERT_TRUE(kept.count(reused)) << read_all(log);
  EXPECT_GE(kept[allocated], 1.0);
  EXPECT_GE(kept[reused], 2.0) << "each protocol's second request reuses the first one's buffer";
  EXPECT_GT(kept[free], 0.0);
  EXPECT_EQ(kept[R"(dype_receive_buffer_bytes{state="pinned"})"], 0.0) << "no GPU here: nothing pinned";
  std::map<std::string, double> none = counters_after_requests("0");
  ASSERT_TRUE(none.count(reused)) << read_all(log);
  EXPECT_EQ(none[reused], 0.0);
  EXPECT_GE(none[allocated], 4.0) << "a buffer of its own for every large payload";
  EXPECT_EQ(none[free], 0.0);
}

}  // namespace
