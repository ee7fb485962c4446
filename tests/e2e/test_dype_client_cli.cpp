// `dype-client` as an operator runs it, against the daemon's real HTTP and gRPC front ends on
// loopback: the same graph answered alike over both protocols, streams from a directory of graph
// files (registered once, deleted at the end, or sent whole), and clear errors on bad input.
#include <gtest/gtest.h>

#include "../test_run_cli.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "../test_temp_dir.h"
#include "../test_tls_certs.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/grpc/grpc_server.h"
#include "runtime/daemon/http/http_server.h"
#include "runtime/daemon/http/tls.h"
#include "graph/mtx_reader.h"

using namespace dype;
using namespace dype::rt::daemon;
namespace fs = std::filesystem;

namespace {

const std::string kExe = std::string(DYPE_BINARY_DIR) + "/apps/dype-client";

using Result = dype::test::CliResult;
Result run(const std::string& args) { return dype::test::run_cli(kExe, args); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

class DypeClientCli : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineServiceOptions o;
    o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
    rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 8, .hidden = 16, .seed = 7};
    o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 500, .feature_len = 8}}};
    service_ = std::make_unique<EngineService>(o);
    ServerOptions so;
    so.http_port = 0;
    so.metrics_port = 0;
    so.allow_client_shm = true;
    http_ = std::make_unique<HttpServer>(*service_, graphs_, metrics_, so);
    http_->start();
    grpc_ = std::make_unique<GrpcServer>(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", 0);
    grpc_->set_shared_memory(&http_->shared_memory());
    grpc_->start();
    ports_ = "--http-port " + std::to_string(http_->http_port()) + " --grpc-port " + std::to_string(grpc_->port()) +
             " --metrics-port " + std::to_string(http_->metrics_port());
    dir_ = dype::test::process_temp_dir("dype_client_cli");
  }
  void TearDown() override {
    grpc_->stop(1.0);
    http_->stop();
  }

  // Three small graphs: Matrix Market (general and symmetric) and a SNAP edge list.
  fs::path graph_dir(const std::string& name) {
    const fs::path d = dir_ / name;
    fs::create_directories(d);
    write(d / "a.mtx", "%%MatrixMarket matrix coordinate pattern general\n6 6 7\n1 2\n2 3\n3 4\n4 5\n5 6\n6 1\n1 4\n");
    write(d / "b.mtx", "%%MatrixMarket matrix coordinate real symmetric\n5 5 4\n2 1 0.5\n3 1 1.5\n4 2 2\n5 4 1\n");
    write(d / "c.txt", "# a SNAP list with ids that are not contiguous\n10 20\n20 30\n30 10\n40 10\n");
    write(d / "notes.md", "not a graph: skipped\n");
    return d;
  }

  std::unique_ptr<EngineService> service_;
  GraphRegistry graphs_;
  Metrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
  std::string ports_;
  fs::path dir_;
};

std::string checksum_of(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("shape \\[[0-9]+, [0-9]+\\] checksum [^ ]+ [^ ]+"))) return "(none)";
  return m.str();
}

TEST_F(DypeClientCli, InferIsTheSameOverHttpAndGrpc) {
  const fs::path g = graph_dir("infer") / "a.mtx";
  const Result h = run(ports_ + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(h.status, 0) << h.out;
  const Result r = run(ports_ + " --protocol grpc infer --model gcn --mtx " + g.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(checksum_of(h.out), "(none)") << h.out;
  EXPECT_EQ(checksum_of(h.out), checksum_of(r.out)) << h.out << r.out;
  EXPECT_NE(h.out.find("shape [6, 16]"), std::string::npos) << h.out;
}

// --grpc-socket: the same answer over dype-serve's Unix-domain socket, unary and streamed, with no
// TCP listener at all (port -1).
TEST_F(DypeClientCli, GrpcOverAUnixSocketGivesTheSameAnswer) {
  const fs::path sock = dir_ / "grpc.sock";
  GrpcServer uds(*service_, graphs_, metrics_, http_->admission(), "127.0.0.1", -1);
  uds.set_unix_socket(sock.string());
  uds.start();
  const fs::path g = graph_dir("uds") / "a.mtx";
  const Result h = run(ports_ + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(h.status, 0) << h.out;
  const std::string via = "--http-port " + std::to_string(http_->http_port()) +
                          " --grpc-port 1 --grpc-socket " + sock.string() + " --metrics-port " +
                          std::to_string(http_->metrics_port());
  const Result r = run(via + " --protocol grpc infer --model gcn --mtx " + g.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(checksum_of(h.out), "(none)") << h.out;
  EXPECT_EQ(checksum_of(h.out), checksum_of(r.out)) << h.out << r.out;
  const Result s = run(via + " --protocol grpc stream --model gcn --dir " +
                       graph_dir("uds").string() + " --per-file 3");
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_NE(s.out.find("9 ok, 0 failed"), std::string::npos) << s.out;
  uds.stop(1.0);
}

// --shm: x and y through regions the client creates and registers; the same answer as through
// the protocol, over HTTP and gRPC, unary and streamed, and nothing left in /dev/shm or registered.
TEST_F(DypeClientCli, SharedMemoryGivesTheSameAnswerAndCleansUp) {
  const fs::path g = graph_dir("shm") / "a.mtx";
  const Result plain = run(ports_ + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(plain.status, 0) << plain.out;
  for (const char* protocol : {"http", "grpc"}) {
    const Result r = run(ports_ + " --protocol " + protocol + " infer --shm --model gcn --mtx " + g.string());
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(checksum_of(r.out), checksum_of(plain.out)) << r.out;
  }
  const Result s = run(ports_ + " --protocol grpc stream --shm --model gcn --dir " + graph_dir("shm-stream").string() +
                       " --per-file 3 --concurrency 2");
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_NE(s.out.find("9 ok, 0 failed"), std::string::npos) << s.out;
  EXPECT_TRUE(http_->shared_memory().status(SharedMemoryRegion::Kind::system, std::nullopt, "address 127.0.0.1").empty());
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    EXPECT_EQ(e.path().filename().string().rfind("dype-client-", 0), std::string::npos) << e.path();
}

// --cuda-shm: x and y in GPU memory the client registers by IPC handle. With a CUDA device, the
// same answer as through the protocol over HTTP and gRPC; without one (or without CUDA), a clear
// refusal before anything is registered, and the daemon serves on.
TEST_F(DypeClientCli, CudaSharedMemoryGivesTheSameAnswerOrSaysWhyNot) {
  const fs::path g = graph_dir("cuda-shm") / "a.mtx";
  const Result plain = run(ports_ + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(plain.status, 0) << plain.out;
  for (const char* protocol : {"http", "grpc"}) {
    const Result r = run(ports_ + " --protocol " + protocol +
                         " infer --cuda-shm --model gcn --mtx " + g.string());
    if (r.status != 0) {
      EXPECT_EQ(r.status, 1) << r.out;
      const bool no_device = r.out.find("--cuda-shm: no CUDA device here") != std::string::npos;
      const bool no_cuda =
          r.out.find("--cuda-shm: this dype-client was built without CUDA") != std::string::npos;
      EXPECT_TRUE(no_device || no_cuda) << r.out;
      std::printf("no CUDA shared memory here: %s\n", r.out.c_str());
    } else {
      EXPECT_EQ(checksum_of(r.out), checksum_of(plain.out)) << r.out;
    }
    EXPECT_TRUE(http_->shared_memory()
                    .status(SharedMemoryRegion::Kind::cuda, std::nullopt, "address 127.0.0.1")
                    .empty());
  }
  const Result s = run(ports_ + " --protocol grpc stream --cuda-shm --model gcn --dir " +
                       graph_dir("cuda-shm-stream").string() + " --per-file 3 --concurrency 2");
  if (s.status == 0) {
    EXPECT_NE(s.out.find("9 ok, 0 failed"), std::string::npos) << s.out;
  } else {
    EXPECT_NE(s.out.find("--cuda-shm: "), std::string::npos) << s.out;
  }
  EXPECT_TRUE(http_->shared_memory()
                  .status(SharedMemoryRegion::Kind::cuda, std::nullopt, "address 127.0.0.1")
                  .empty());
  const Result both = run(ports_ + " infer --cuda-shm --shm --model gcn --mtx " + g.string());
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.out.find("excludes"), std::string::npos) << both.out;
  const Result again = run(ports_ + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(checksum_of(again.out), checksum_of(plain.out));
}

// The user's own features (.npy written by numpy, or .safetensors) go in, the output comes back
// as a .npy numpy reads, equal to the daemon's reference answer; small outputs print top classes.
TEST_F(DypeClientCli, InferWithFeaturesFromNpyWritesNpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3-numpy";
  const fs::path g = graph_dir("npy") / "a.mtx", x = dir_ / "x.npy", y = dir_ / "y.npy", x64 = dir_ / "x64.npy";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"import numpy as np; a=np.arange(48,dtype=np.float32).reshape(6,8)/48; "
                         "np.save('" + x.string() + "', a); np.save('" + x64.string() + "', a.astype(np.float64))\"").c_str()),
            0);
  const Result r = run(ports_ + " infer --model gcn --graph " + g.string() + " --features " + x.string() + " --out " +
                       y.string() + " --top-k 3");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("top 3 of 16 per row"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + y.string()), std::string::npos) << r.out;
  // numpy reads the output, and it is the reference forward pass of the same inputs.
  std::vector<float> xs(48);
  for (int i = 0; i < 48; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i) / 48.0f;
  const rt::HostTensor want = rt::reference_forward(
      *service_->model("gcn").model,
      rt::Request::gnn(rt::Graph::from_edges(kernels::read_mtx(g), true), rt::make_tensor(6, 8, xs)));
  const fs::path dump = dir_ / "y.txt";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"import numpy as np; y=np.load('" + y.string() +
                         "'); assert y.dtype==np.float32 and y.shape==(6,16); np.savetxt('" + dump.string() +
                         "', y.reshape(-1), fmt='%.9g')\"").c_str()),
            0);
  std::ifstream in(dump);
  std::vector<float> got;
  for (float v; in >> v;) got.push_back(v);
  EXPECT_LE(rt::relative_error(rt::make_tensor(6, 16, got), want), 1e-5);
  // float64 features read as well; the same answer.
  const Result r64 = run(ports_ + " --protocol grpc infer --model gcn --graph " + g.string() + " --features " + x64.string());
  ASSERT_EQ(r64.status, 0) << r64.out;
  EXPECT_EQ(checksum_of(r64.out), checksum_of(r.out));
  // Features that do not fit the model or the graph are refused naming the file.
  const Result wide = run(ports_ + " infer --model gcn --graph " + g.string() + " --features " + y.string());
  EXPECT_EQ(wide.status, 1);
  EXPECT_NE(wide.out.find("has 16 features per row, the model takes 8"), std::string::npos) << wide.out;
  const Result notnpy = run(ports_ + " infer --model gcn --graph " + g.string() + " --features " + g.string());
  EXPECT_EQ(notnpy.status, 1);
  EXPECT_NE(notnpy.out.find("not a .npy file"), std::string::npos) << notnpy.out;
}

TEST_F(DypeClientCli, StreamsADirectoryOverGrpcAndDeletesItsGraphs) {
  const fs::path d = graph_dir("stream");
  const Result r = run(ports_ + " --protocol grpc stream --model gcn --dir " + d.string() + " --per-file 5 --concurrency 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("15 ok, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gRPC stream"), std::string::npos) << r.out;
  for (const char* f : {"a.mtx (6 nodes", "b.mtx (5 nodes", "c.txt (4 nodes"}) EXPECT_NE(r.out.find(f), std::string::npos) << f << "\n" << r.out;
  EXPECT_EQ(r.out.find("notes.md"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deleted 3 of 3 registered graphs"), std::string::npos) << r.out;
  EXPECT_EQ(graphs_.size(), 0u);
}

// A client's graphs under its owner key: listed, and dropped all at once (what a stream stopped with
// Ctrl-C left behind), while another owner's stay.
TEST_F(DypeClientCli, ListsAndDeletesItsOwnGraphs) {
  kernels::EdgeList e;
  e.num_nodes = 3;
  e.src = {0, 1};
  e.dst = {1, 2};
  const std::string mine = graphs_.add(e, {"job-42", "127.0.0.1"});
  graphs_.add(e, {"other", "127.0.0.1"});
  Result r = run(ports_ + " --graph-owner job-42 graphs list");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("1 graphs registered"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(mine + "  3 nodes, 2 edges"), std::string::npos) << r.out;
  r = run(ports_ + " --graph-owner job-42 graphs delete");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("deleted 1 graphs\n  " + mine), std::string::npos) << r.out;
  EXPECT_EQ(graphs_.size(), 1u);
  r = run(ports_ + " --graph-owner 'bad key' graphs list");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("Dype-Graph-Owner: must be printable ASCII without spaces"), std::string::npos) << r.out;
}

// Against servers started with an inference token: --infer-token-file carries it on HTTP and gRPC
// infer calls and on the graph registrations of a stream; without it the server's 401 is shown.
TEST_F(DypeClientCli, InferenceTokenFromAFile) {
  ServerOptions so;
  so.http_port = 0;
  so.metrics_port = 0;
  so.infer_token = "t0ken";
  HttpServer http(*service_, graphs_, metrics_, so);
  http.start();
  GrpcServer grpc(*service_, graphs_, metrics_, http.admission(), "127.0.0.1", 0);
  grpc.set_infer_token("t0ken");
  grpc.start();
  const std::string ports = "--http-port " + std::to_string(http.http_port()) + " --grpc-port " +
                            std::to_string(grpc.port()) + " --metrics-port " + std::to_string(http.metrics_port());
  const fs::path token = dir_ / "infer.token";
  write(token, "t0ken\n");
  const fs::path g = graph_dir("token") / "a.mtx";
  const Result h = run(ports + " --infer-token-file " + token.string() + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(h.status, 0) << h.out;
  const Result r = run(ports + " --infer-token-file " + token.string() + " --protocol grpc infer --model gcn --mtx " + g.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(checksum_of(h.out), checksum_of(r.out));
  const Result st = run(ports + " --infer-token-file " + token.string() + " --protocol grpc stream --model gcn --dir " +
                        graph_dir("token").string() + " --per-file 2");
  ASSERT_EQ(st.status, 0) << st.out;
  EXPECT_NE(st.out.find("6 ok, 0 failed"), std::string::npos) << st.out;
  const Result no = run(ports + " infer --model gcn --mtx " + g.string());
  EXPECT_NE(no.status, 0);
  EXPECT_NE(no.out.find("missing or wrong inference token"), std::string::npos) << no.out;
  grpc.stop(1.0);
  http.stop();
}

TEST_F(DypeClientCli, WholeGraphsOverHttpRepeatTheFiles) {
  const fs::path d = graph_dir("whole");
  const Result r = run(ports_ + " stream --model gcn --dir " + d.string() + " --per-file 2 --requests 13 --whole-graphs");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("13 ok, 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("registered"), std::string::npos) << r.out;
  EXPECT_EQ(graphs_.size(), 0u);
}

TEST_F(DypeClientCli, DriftStreamOverGrpc) {
  const Result r = run(ports_ + " --protocol grpc stream --model gcn --drift 0:40x160,10:90x400 --requests 20");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("20 ok, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("phase 1 from request 10: generated 90 nodes"), std::string::npos) << r.out;
  EXPECT_EQ(graphs_.size(), 0u);
}

// --tls-ca: HTTPS and gRPC over TLS to a daemon serving with a certificate that CA signed, the same
// answer as over plain text; a client trusting another CA, or speaking plain text, is refused.
TEST_F(DypeClientCli, TlsCaOverHttpsAndGrpc) {
  const dype::test::TestPki& pki = dype::test::make_test_pki();
  if (!pki.ok) GTEST_SKIP() << pki.why;
  ServerOptions so;
  so.http_port = 0;
  so.metrics_port = 0;
  so.tls = load_tls_identity(pki.server_cert.string(), pki.server_key.string());
  HttpServer https(*service_, graphs_, metrics_, so);
  https.start();
  GrpcServer grpcs(*service_, graphs_, metrics_, https.admission(), "127.0.0.1", 0);
  grpcs.set_tls(*so.tls);
  grpcs.start();
  const std::string tls_ports = "--http-port " + std::to_string(https.http_port()) + " --grpc-port " +
                                std::to_string(grpcs.port()) + " --metrics-port " + std::to_string(https.metrics_port());
  const std::string ca = " --tls-ca " + pki.ca.string() + " ";
  const fs::path g = graph_dir("tls") / "a.mtx";
  const Result plain = run(ports_ + " infer --model gcn --mtx " + g.string());
  ASSERT_EQ(plain.status, 0) << plain.out;
  for (const std::string protocol : {"http", "grpc"}) {
    const Result r = run(tls_ports + ca + "--protocol " + protocol + " infer --model gcn --mtx " + g.string());
    ASSERT_EQ(r.status, 0) << protocol << "\n" << r.out;
    EXPECT_EQ(checksum_of(r.out), checksum_of(plain.out)) << r.out << plain.out;
    // a stream registers its graphs over HTTPS, then infers over the protocol
    const Result s = run(tls_ports + ca + "--protocol " + protocol + " stream --model gcn --dir " +
                         graph_dir("tls").string() + " --per-file 2 --concurrency 1");
    ASSERT_EQ(s.status, 0) << protocol << "\n" << s.out;
    EXPECT_NE(s.out.find("6 ok, 0 failed"), std::string::npos) << s.out;
    const Result other = run(tls_ports + " --tls-ca " + pki.other_ca.string() + " --protocol " + protocol +
                             " infer --model gcn --nodes 20 --edges 60");
    EXPECT_EQ(other.status, 1) << other.out;
    const Result unencrypted = run(tls_ports + " --protocol " + protocol + " infer --model gcn --nodes 20 --edges 60");
    EXPECT_EQ(unencrypted.status, 1) << unencrypted.out;
  }
  const Result other = run(tls_ports + " --tls-ca " + pki.other_ca.string() + " infer --model gcn --nodes 20 --edges 60");
  EXPECT_NE(other.out.find("SSLServerVerification (the server's certificate is not signed by a CA this client trusts"), std::string::npos) << other.out;
  const Result missing = run(tls_ports + " --tls-ca /no/such/ca.pem infer --model gcn --nodes 20 --edges 60");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("--tls-ca: cannot read '/no/such/ca.pem'"), std::string::npos) << missing.out;
  grpcs.stop(1.0);
  https.stop();
}

// --updates: a streaming graph from an update file (and generated), each update answered for the
// nodes it changed; the daemon's graph follows every update and is deleted at the end.
TEST_F(DypeClientCli, UpdateFileAndDriftStreamAGraph) {
  write(dir_ / "updates.txt",
        "+ 3 7; + 4 9   # two edges\n"
        "\n"
        "- 3 7\n"
        "n 1 2 3 4 5 6 7 8; + 100 0\n"
        "x 5 0 0 0 0 0 0 0 1\n");
  const Result r = run(ports_ + " stream --model gcn --updates " + (dir_ / "updates.txt").string() + " --nodes 100 --edges 300");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("4 updates ok, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("update + answer p50"), std::string::npos) << r.out;
  const Result d = run(ports_ + " --protocol grpc stream --model gcn --updates drift --update-drift 0:1,20:40 --requests 30 "
                                "--nodes 100 --edges 300");
  ASSERT_EQ(d.status, 0) << d.out;
  EXPECT_NE(d.out.find("update 20: now 40 edges an update"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("30 updates ok, 0 failed"), std::string::npos) << d.out;
  EXPECT_EQ(graphs_.size(), 0u);
  // A line that does not parse names the file, the update and the change; a refused update says why.
  write(dir_ / "bad.txt", "+ 1 2\n+ 3\n");
  const Result b = run(ports_ + " stream --model gcn --updates " + (dir_ / "bad.txt").string() + " --nodes 10 --edges 20");
  EXPECT_EQ(b.status, 1) << b.out;
  EXPECT_NE(b.out.find("bad.txt: update 2: change 0 ('+'): expects more numbers"), std::string::npos) << b.out;
  write(dir_ / "absent.txt", "- 1 2\n");
  const Result a = run(ports_ + " stream --model gcn --updates " + (dir_ / "absent.txt").string() + " --nodes 10 --edges 0");
  EXPECT_EQ(a.status, 2) << a.out;
  EXPECT_NE(a.out.find("remove_edges[0]: edge 1 -> 2 is not in the graph"), std::string::npos) << a.out;
}

TEST_F(DypeClientCli, BadInputNamesTheProblem) {
  struct Case {
    std::string args, says;
  };
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  const fs::path bad = dir_ / "bad";
  fs::create_directories(bad);
  write(bad / "broken.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n");
  for (const Case& c : std::vector<Case>{
           {"stream --dir " + (dir_ / "nope").string(), "not a directory"},
           {"stream --dir " + empty.string(), "holds no graph file"},
           {"stream --dir " + bad.string(), "broken.mtx"},
           {"stream --drift 0:10x", "--drift '0:10x': expected at_request:AxB"},
           {"stream --drift 5:10x20", "the first phase must start at request 0"},
           {"stream --drift 0:10x20,0:20x40", "phase starts must increase"},
           {"stream --concurrency 0", "--concurrency: must be at least 1"},
           {"stream --dir " + empty.string() + " --per-file 0", "--per-file: must be at least 1"},
           {"--protocol grpc infer --model nosuch", "unknown model 'nosuch'"},
           {"infer --model nosuch", "HTTP 404"},
       }) {
    const Result r = run(ports_ + " " + c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
  // The daemon kept serving.
  EXPECT_EQ(run(ports_ + " --protocol grpc infer --model gcn --nodes 30 --edges 90").status, 0);
}

}  // namespace
