// `dype-schedule` as an operator runs it: the built executable, its text and JSON output, and its
// answers to bad input (exit 2 naming the flag or key) and impossible targets (exit 3 saying
// which constraint and by how much).
#include <gtest/gtest.h>

#include "../test_run_cli.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

const std::string kExe = std::string(DYPE_BINARY_DIR) + "/apps/dype-schedule";
const std::string kSys = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
const std::string kGcn = std::string(DYPE_SOURCE_DIR) + "/configs/models/gcn.yaml";
const std::string kSwin = std::string(DYPE_SOURCE_DIR) + "/configs/models/swin-transformer.yaml";

using Result = dype::test::CliResult;
Result run(const std::string& args) { return dype::test::run_cli(kExe, args); }

// A two-host system (scheduler format, issue 20): every stage says where it runs, host:kind.
TEST(DypeScheduleCli, TwoHostPlansSayWhereEachStageRuns) {
  const std::string two = std::string(DYPE_SOURCE_DIR) + "/configs/systems/two-host-100g.yaml";
  const Result r = run("--system " + two + " --model " + kGcn + " --dataset S1 --mode perf --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["stages"].empty());
  for (const auto& st : j["stages"]) {
    const std::string where = st["where"];
    EXPECT_TRUE(where == "a:gpu" || where == "b:fpga") << st.dump();
    EXPECT_EQ(where, st["host"].get<std::string>() + ":" + st["kind"].get<std::string>());
  }
  const Result text = run("--system " + two + " --model " + kGcn + " --dataset S1 --mode perf");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("3 x b:fpga, 2 x a:gpu"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("a (NIC 100 Gb/s, 3 us), b (NIC 100 Gb/s, 3 us)"), std::string::npos) << text.out;
}

TEST(DypeScheduleCli, JsonHasEveryDocumentedField) {
  const Result r = run("--system " + kSys + " --model " + kGcn + " --dataset S1 --mode balanced --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"mnemonic", "stages", "period_s", "throughput_per_s", "latency_s",
                          "energy_j_per_inference", "solve_time_s", "objective", "solver"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing in " << r.out;
  }
  EXPECT_EQ(j["objective"], "balanced");
  EXPECT_EQ(j["solver"], "exact");
  ASSERT_FALSE(j["stages"].empty());
  int kernels = 0;
  for (const auto& st : j["stages"]) {
    EXPECT_GE(st["count"].get<int>(), 1);
    EXPECT_TRUE(st["kind"] == "gpu" || st["kind"] == "fpga") << st.dump();
    kernels += static_cast<int>(st["kernel_names"].size());
  }
  // GCN: 2 x (SpMM, GEMM); a layer-recurrent plan names the kernels of one round.
  EXPECT_EQ(kernels * j.value("rounds", 1), 4) << r.out;
  EXPECT_NEAR(j["throughput_per_s"].get<double>() * j["period_s"].get<double>(), 1.0, 1e-9);
}

TEST(DypeScheduleCli, TextExplainParetoAndBaselines) {
  Result r = run("--system " + kSys + " --model " + kGcn + " --dataset S4 --mode perf --explain --pareto");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("plan "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("why: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cost tables"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pareto front"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("modelled"), std::string::npos) << r.out;
  // --explain lists the solver's passes in the order they ran: perf runs pass 1 (period search) then 2.
  const auto passes = r.out.find("solver passes (exact), in the order they ran:");
  ASSERT_NE(passes, std::string::npos) << r.out;
  const auto p1 = r.out.find("pass 1  fastest", passes), p2 = r.out.find("pass 2", passes);
  ASSERT_NE(p1, std::string::npos) << r.out;
  ASSERT_NE(p2, std::string::npos) << r.out;
  EXPECT_LT(p1, p2) << r.out;

  r = run("--system " + kSys + " --model " + kGcn + " --nodes 169343 --edges 1166243 --features 128 "
          "--baseline static --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["solver"], "static");
  // Static pins SpMM to FPGAs and GEMM to GPUs: four alternating stages.
  EXPECT_EQ(j["stages"].size(), 4u) << r.out;

  r = run("--system " + kSys + " --model " + kSwin + " --seq-len 4096 --window 512 --mode energy --solver paper");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("solver paper"), std::string::npos) << r.out;
}

TEST(DypeScheduleCli, GraphFileInput) {
  const std::string path = testing::TempDir() + "/dype_schedule_cli.mtx";
  {
    std::ofstream f(path);
    f << "%%MatrixMarket matrix coordinate pattern general\n4 4 5\n1 2\n2 3\n3 4\n4 1\n1 3\n";
  }
  const Result r = run("--system " + kSys + " --model " + kGcn + " --graph " + path + " --features 16 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["input"].get<std::string>().find("4 nodes, 5 nnz"), std::string::npos) << r.out;
}

TEST(DypeScheduleCli, BadInputNamesTheFlagOrKey) {
  struct Case {
    std::string args, expect;
    int status;
  };
  const std::string base = "--system " + kSys + " --model " + kGcn;
  const Case cases[] = {
      {base + " --dataset S9", "--dataset", 2},
      {base + " --dataset S1 --nodes 5 --edges 4", "one way only", 2},
      {base + " --nodes 100 --edges 300", "feature", 2},
      {base + " --dataset S1 --ratio 1.5", "--ratio", 2},
      {base + " --dataset S1 --min-throughput 5", "--mode qos", 2},
      {base + " --dataset S1 --baseline nosuch", "nosuch", 2},
      {base + " --graph /nonexistent/g.mtx --features 8", "/nonexistent/g.mtx", 2},
      {"--system " + kGcn + " --model " + kGcn + " --dataset S1", "gcn.yaml", 2},
      {base + " --dataset S1 --mode fastest", "--mode", 2},  // CLI11's validation error, exit 2 like the rest
      {base + " --dataset S1 --no-such-flag", "--no-such-flag", 2},
      {"--model " + kGcn + " --dataset S1", "--system", 2},
      {base + " --nodes 99999999999999999999 --edges 10 --features 8", "--nodes", 2},
      {base + " --nodes 1e6 --edges 10 --features 8", "--nodes", 2},
      {base + " --nodes -5 --edges 10 --features 8", "--nodes", 2},
      {base + " --nodes 100 --edges 10001 --features 8", "nodes^2", 2},
      {base + " --edges 10 --features 8", "--edges", 2},
      {base + " --dataset S1 --skew nan", "--skew", 2},
      {base + " --dataset S1 --skew -3", "--skew", 2},
      {base + " --dataset S1 --skew 0.5", "--skew", 2},
      {base + " --dataset S1 --skew inf", "--skew", 2},
      {base + " --dataset S1 --mode qos", "needs a target", 2},
      {base + " --dataset S1 --mode qos --max-latency 0", "--max-latency", 2},
      {base + " --dataset S1 --mode qos --min-throughput 0", "--min-throughput", 2},
      {base + " --dataset S1 --mode qos --min-throughput 1e9", "min throughput", 3},
      {base + " --dataset S1 --mode qos --max-latency 1e-9", "max latency", 3},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace

namespace {

// A throughput floor out of reach is refused with the best throughput over every plan dype-schedule
// considers (every FPGA image assignment and shape), which is what --mode perf plans; and the
// latency objective meets a floor it can reach.
TEST(DypeScheduleCli, UnreachableFloorNamesTheBestThroughputOverEveryPlan) {
  const std::string base = "--system " + kSys + " --model " + kGcn + " --dataset S1";
  const Result perf = run(base + " --mode perf --json");
  ASSERT_EQ(perf.status, 0) << perf.out;
  const double best = nlohmann::json::parse(perf.out)["throughput_per_s"].get<double>();
  char want[64];
  std::snprintf(want, sizeof want, "best achievable %.4g/s", best);
  for (const char* mode : {"qos", "latency"}) {
    const Result r = run(base + " --mode " + mode + " --min-throughput 100");
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << mode << ": " << r.out << " (want " << want << ")";
  }
  const Result lat = run(base + " --mode latency --min-throughput " + std::to_string(0.97 * best) + " --json");
  ASSERT_EQ(lat.status, 0) << lat.out;
  const auto j = nlohmann::json::parse(lat.out);
  EXPECT_EQ(j["objective"], "latency");
  EXPECT_GE(j["throughput_per_s"].get<double>(), 0.97 * best * (1 - 1e-9));
}

TEST(DypeScheduleCli, KernelTimesFromFittedModelsUnlessNone) {
  Result r = run("--system " + kSys + " --model " + kGcn + " --dataset S4 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(nlohmann::json::parse(r.out)["cost_source"].get<std::string>().find("fitted perf models"), std::string::npos)
      << r.out;
  r = run("--system " + kSys + " --model " + kGcn + " --dataset S4 --json --perfmodels none");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["cost_source"].get<std::string>().find("fitted"), std::string::npos) << r.out;
  r = run("--system " + kSys + " --model " + kGcn + " --dataset S4 --perfmodels /nonexistent/models");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--perfmodels /nonexistent/models: not a directory"), std::string::npos) << r.out;
}

}  // namespace
