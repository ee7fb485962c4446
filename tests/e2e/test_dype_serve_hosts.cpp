// dype-serve across hosts, as an operator runs it: two workers (`dype-serve --stage-server`, one
// with two emulated MI210s, one with two emulated U280s) and a coordinator whose system file lists
// them under `hosts` and whose own devices are not schedulable, so every stage of every plan runs on
// a worker, over UCX on loopback TCP. Answers over HTTP equal the CPU reference of the same seeded
// models; the workers' logs count the requests they served.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/daemon/engine_service.h"
#include "runtime/model.h"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include "../test_serve_process.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dype::test::read_all;
using dype::test::spawn_serve;
using json = nlohmann::json;

// Children killed when the test ends, however it ends.
struct Children {
  std::vector<pid_t> pids;
  ~Children() {
    for (pid_t p : pids) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }
  int stop(pid_t p) {
    ::kill(p, SIGTERM);
    int status = -1;
    ::waitpid(p, &status, 0);
    std::erase(pids, p);
    return status;
  }
};

std::string device_line(const std::string& name, const std::string& kind, const std::string& host, int socket) {
  const std::string dir = std::string(DYPE_SOURCE_DIR) + "/configs";
  std::string y = "  - {name: " + name + ", backend: emu, socket: " + std::to_string(socket) + ", p2p: true";
  if (kind == "gpu") y += ", model: " + dir + "/devices/amd-mi210.yaml";
  else y += ", model: " + dir + "/devices/xilinx-u280.yaml, bitstream: " + dir + "/bitstreams/u280-sextans-gemm.yaml";
  if (!host.empty()) y += ", host: " + host;
  return y + "}\n";
}

std::string cpu_line() {
  return "  - {name: cpu0, backend: cpu, model: " + std::string(DYPE_SOURCE_DIR) +
         "/configs/devices/generic-cpu.yaml, socket: 0, schedulable: false, threads: 1}\n";
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

TEST(DypeServeHosts, CoordinatorAndTwoWorkersAnswerAsTheReference) {
  const fs::path dir = dype::test::process_temp_dir("dype_serve_hosts");
  Children children;
  const std::string head = "system: {name: part}\ntopology: {sockets: 2}\ndevices:\n";
  write(dir / "a.yaml", head + cpu_line() + device_line("gpu0", "gpu", "", 0) + device_line("gpu1", "gpu", "", 0));
  write(dir / "b.yaml", head + cpu_line() + device_line("fpga0", "fpga", "", 1) + device_line("fpga1", "fpga", "", 1));
  int stage_port[2] = {0, 0};
  const char* names[2] = {"a", "b"};
  for (int w = 0; w < 2; ++w) {
    const fs::path ports = dir / (std::string("ports-") + names[w] + ".json"), log = dir / (std::string(names[w]) + ".log");
    fs::remove(log);
    children.pids.push_back(spawn_serve({"--stage-server", "127.0.0.1:0", "--host-name", names[w], "--system",
                                         (dir / (std::string(names[w]) + ".yaml")).string(), "--builtin-models"},
                                        log, ports));
    ASSERT_TRUE(fs::exists(ports)) << "worker " << names[w] << " did not start:\n" << read_all(log);
    stage_port[w] = json::parse(read_all(ports))["stage"];
  }
  std::string coord = "system: {name: two-workers}\ntopology: {sockets: 2}\nhosts:\n  - {name: here}\n";
  coord += "  - {name: a, address: \"127.0.0.1:" + std::to_string(stage_port[0]) + "\", nic_gbit_per_s: 100}\n";
  coord += "  - {name: b, address: \"127.0.0.1:" + std::to_string(stage_port[1]) + "\", nic_gbit_per_s: 100}\n";
  coord += "devices:\n" + cpu_line() + device_line("gpu0", "gpu", "a", 0) + device_line("gpu1", "gpu", "a", 0) +
           device_line("fpga0", "fpga", "b", 1) + device_line("fpga1", "fpga", "b", 1);
  write(dir / "coord.yaml", coord);
  const fs::path ports = dir / "ports.json", log = dir / "coord.log";
  fs::remove(log);
  const pid_t coordinator = spawn_serve({"--system", (dir / "coord.yaml").string(), "--builtin-models", "--http-port", "0",
                                         "--grpc-port", "-1", "--metrics-port", "-1"},
                                        log, ports);
  children.pids.push_back(coordinator);
  ASSERT_TRUE(fs::exists(ports)) << "the coordinator did not start:\n" << read_all(log);
  const int http_port = json::parse(read_all(ports))["http"];
  httplib::Client client("127.0.0.1", http_port);
  client.set_read_timeout(60, 0);

  // The built-in models are seeded: the test builds the same ones for the reference.
  for (const std::string model : {"gcn", "gin"}) {
    const auto served = dype::rt::daemon::default_models();
    const auto it = std::find_if(served.begin(), served.end(), [&](const auto& m) { return m.name == model; });
    ASSERT_NE(it, served.end());
    const dype::rt::Model m = dype::rt::Model::make(it->spec);
    const std::int64_t n = 300, e = 1500, f = m.spec().in_features;
    const auto edges = dype::rt::random_graph(n, e, 41);
    std::vector<std::int64_t> edge_index = edges.src;
    edge_index.insert(edge_index.end(), edges.dst.begin(), edges.dst.end());
    std::vector<float> x(static_cast<std::size_t>(n * f));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    const json body = {{"inputs",
                        {{{"name", "x"}, {"shape", {n, f}}, {"datatype", "FP32"}, {"data", x}},
                         {{"name", "edge_index"}, {"shape", {2, e}}, {"datatype", "INT64"}, {"data", edge_index}}}}};
    for (int round = 0; round < 3; ++round) {
      auto r = client.Post(("/v2/models/" + model + "/infer").c_str(), body.dump(), "application/json");
      ASSERT_TRUE(r) << "no answer:\n" << read_all(log);
      ASSERT_EQ(r->status, 200) << r->body << "\n" << read_all(log);
      const json out = json::parse(r->body)["outputs"][0];
      const auto y = dype::rt::make_tensor(out["shape"][0], out["shape"][1], out["data"].get<std::vector<float>>());
      const auto expect = dype::rt::reference_forward(
          m, dype::rt::Request::gnn(dype::rt::graph_for_model(edges, m.spec()), dype::rt::make_tensor(n, f, x)));
      EXPECT_LE(dype::rt::relative_error(y, expect), 1e-5) << model << " round " << round;
    }
  }
  EXPECT_EQ(children.stop(coordinator), 0) << read_all(log);
  for (int w = 0; w < 2; ++w) {
    const fs::path wlog = dir / (std::string(names[w]) + ".log");
    EXPECT_EQ(children.stop(children.pids.front()), 0) << read_all(wlog);
  }
  std::int64_t served_requests = 0;
  for (int w = 0; w < 2; ++w) {
    const std::string text = read_all(dir / (std::string(names[w]) + ".log"));
    const auto at = text.find("stage server: ");
    ASSERT_NE(at, std::string::npos) << text;
    const auto links_end = text.find(" links, ", at);
    served_requests += std::stoll(text.substr(links_end + 8));
  }
  EXPECT_GE(served_requests, 6) << "the workers served fewer requests than were sent";
}

}  // namespace
