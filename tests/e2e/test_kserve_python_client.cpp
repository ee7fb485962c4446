// A KServe v2 / Triton client dype did not write: examples/python/kserve_shm_client.py, its stubs
// generated from the published runtime/daemon/proto/grpc_service.proto by Debian's grpc_tools,
// against dype-serve as an operator runs it (--allow-client-shm). x and y travel through a POSIX
// shared-memory object, the answer equals the one sent as raw contents, and two bad uses get their
// gRPC codes (an unknown region NOT_FOUND, a byte size not matching the shape INVALID_ARGUMENT);
// the same again over dype-serve's Unix-domain socket (--grpc-socket, target unix:PATH).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "../test_run_cli.h"
#include "../test_serve_process.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dype::test::read_all;

const std::string kPython = "/usr/bin/python3";  // Debian's, where python3-grpcio and python3-grpc-tools install
const std::string kClient = std::string(DYPE_SOURCE_DIR) + "/examples/python/kserve_shm_client.py";

TEST(KservePythonClient, SharedMemoryExampleAgreesWithRawContents) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is not installed";
  const auto probe = dype::test::run_cli(kPython, "-c 'import grpc, grpc_tools.protoc, numpy'");
  if (probe.status != 0)
    GTEST_SKIP() << kPython << " cannot import grpc, grpc_tools and numpy (Debian's python3-grpcio, "
                 << "python3-grpc-tools, python3-numpy: scripts/setup.sh):\n"
                 << probe.out;

  const fs::path dir = dype::test::process_temp_dir("dype_kserve_python");
  const fs::path ports = dir / "ports.json", log = dir / "serve.log";
  const std::string src = DYPE_SOURCE_DIR;
  dype::test::Children children;
  const pid_t pid = dype::test::spawn_serve(
      {"--system", src + "/configs/systems/paper-testbed-pcie4.yaml", "--builtin-models",
       "--no-warmup", "--allow-client-shm", "--http-port", "0", "--grpc-port", "0",
       "--metrics-port", "-1", "--grpc-socket", (dir / "grpc.sock").string()},
      log, ports);
  children.pids.push_back(pid);
  ASSERT_TRUE(fs::exists(ports)) << "no port file after 60 s:\n" << read_all(log);
  const int grpc_port = nlohmann::json::parse(read_all(ports))["grpc"].get<int>();
  ASSERT_GT(grpc_port, 0) << read_all(ports);

  EXPECT_EQ(nlohmann::json::parse(read_all(ports))["grpc_socket"], (dir / "grpc.sock").string());
  for (const std::string& target : {"--grpc-port " + std::to_string(grpc_port),
                                    "--target unix:" + (dir / "grpc.sock").string()}) {
    const auto client = dype::test::run_cli(kPython, kClient + " " + target);
    EXPECT_EQ(client.status, 0) << target << ": " << client.out << "\ndype-serve's log:\n"
                                << read_all(log);
    EXPECT_NE(client.out.find("kserve_shm_client: ok"), std::string::npos) << client.out;
    EXPECT_NE(client.out.find("unknown region: NOT_FOUND"), std::string::npos) << client.out;
    EXPECT_NE(client.out.find("byte_size not matching shape and datatype: INVALID_ARGUMENT"),
              std::string::npos)
        << client.out;
  }
  EXPECT_EQ(children.stop(pid), 0) << read_all(log);
  EXPECT_FALSE(fs::exists(dir / "grpc.sock")) << "dype-serve removes its socket when it stops";
}

// examples/python/streaming_graph_client.py, its stubs generated from grpc_service.proto and
// dype_graphs.proto: a graph registered with its features, updates on one UpdateStream (one
// refused), and after them the answer from the kept activations equal to the whole graph's.
TEST(KservePythonClient, StreamingGraphExampleAgreesWithTheWholeGraph) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is not installed";
  const auto probe = dype::test::run_cli(kPython, "-c 'import grpc, grpc_tools.protoc, numpy'");
  if (probe.status != 0)
    GTEST_SKIP() << kPython << " cannot import grpc, grpc_tools and numpy (scripts/setup.sh):\n" << probe.out;
  const fs::path dir = dype::test::process_temp_dir("dype_streaming_python");
  const fs::path ports = dir / "ports.json", log = dir / "serve.log";
  const std::string src = DYPE_SOURCE_DIR;
  dype::test::Children children;
  const pid_t pid = dype::test::spawn_serve({"--system", src + "/configs/systems/paper-testbed-pcie4.yaml",
                                             "--builtin-models", "--no-warmup", "--http-port", "0", "--grpc-port", "0",
                                             "--metrics-port", "-1"},
                                            log, ports);
  children.pids.push_back(pid);
  ASSERT_TRUE(fs::exists(ports)) << "no port file after 60 s:\n" << read_all(log);
  const int grpc_port = nlohmann::json::parse(read_all(ports))["grpc"].get<int>();
  const auto client = dype::test::run_cli(
      kPython, src + "/examples/python/streaming_graph_client.py --grpc-port " + std::to_string(grpc_port));
  EXPECT_EQ(client.status, 0) << client.out << "\ndype-serve's log:\n" << read_all(log);
  EXPECT_NE(client.out.find("streaming_graph_client: ok"), std::string::npos) << client.out;
  EXPECT_NE(client.out.find("update 5 refused: add_edges[1][0]"), std::string::npos) << client.out;
  EXPECT_EQ(children.stop(pid), 0) << read_all(log);
}

}  // namespace
