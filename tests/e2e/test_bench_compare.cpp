// bench/compare.py as bench/run_all.sh calls it, on two runs written here: which metrics it flags
// and which it leaves alone. A ratio against a peer that fell past the tolerance is flagged, and so
// is one the baseline had and this run lacks; a ratio between two of dype's own paths (own_ratio)
// is flagged only when it misses its target; absolute figures are never compared across runs; a
// retired metric's absence is not a slip.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../test_run_cli.h"
#include "../test_temp_dir.h"

namespace dype {
namespace {

using nlohmann::json;

json metric(const std::string& suite, const std::string& name, double value,
            const std::string& kind, json target = nullptr) {
  json m = {{"name", suite + "." + name},
            {"suite", suite},
            {"value", value},
            {"unit", "x"},
            {"kind", kind},
            {"higher_is_better", true},
            {"peer", "p"},
            {"target", target},
            {"basis", "measured"},
            {"status", "ok"}};
  m["met"] = target.is_null() ? json(nullptr) : json(value >= target.get<double>());
  return m;
}

json run(const std::string& date, json metrics) {
  return {{"schema", 1},
          {"date", date},
          {"git_commit", "0123456789abcdef"},
          {"host", "test"},
          {"cpu_model", "test cpu"},
          {"threads", 2},
          {"suites", {{{"name", "s"}, {"status", "ok"}}, {{"name", "models"}, {"status", "ok"}}}},
          {"metrics", std::move(metrics)}};
}

std::string write(const std::string& path, const json& j) {
  std::ofstream(path) << j.dump(2);
  return path;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class BenchCompare : public ::testing::Test {
 protected:
  const std::string dir_ = test::process_temp_dir("dype-bench-compare").string();
  std::string compare(const json& before, const json& after, int* status) {
    const std::string b = write(dir_ + "/before.json", before);
    const std::string a = write(dir_ + "/after.json", after);
    const test::CliResult r =
        test::run_cli("/usr/bin/python3 " + std::string(DYPE_SOURCE_DIR) + "/bench/compare.py",
                      a + " " + b + " --flagged-out " + dir_ + "/flagged.txt");
    *status = r.status;
    return r.out;
  }
};

TEST_F(BenchCompare, FlagsFallsAgainstPeersMissedOwnTargetsAndMissingRatiosOnly) {
  const json before = run(
      "2026-01-01T00:00:00+00:00",
      {metric("s", "peer_fell", 10, "ratio"), metric("s", "peer_steady", 10, "ratio"),
       metric("s", "own_fell", 75, "own_ratio", 50), metric("s", "own_missed", 60, "own_ratio", 50),
       metric("s", "gone", 3, "ratio"), metric("s", "time_ms", 1, "absolute"),
       metric("models", "gcn_vs_torch_csr", 6.9, "ratio", 2)});
  const json after =
      run("2026-01-02T00:00:00+00:00",
          {metric("s", "peer_fell", 8, "ratio"), metric("s", "peer_steady", 9.5, "ratio"),
           metric("s", "own_fell", 60, "own_ratio", 50),
           metric("s", "own_missed", 40, "own_ratio", 50), metric("s", "time_ms", 100, "absolute"),
           metric("models", "gcn_vs_fastest_torch_csr", 4, "ratio", 2)});
  int status = 0;
  const std::string out = compare(before, after, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_EQ(read(dir_ + "/flagged.txt"),
            "s s.peer_fell fell\ns s.own_missed missed\ns s.gone missing\n")
      << out;
  EXPECT_NE(out.find("own paths: not flagged"), std::string::npos) << out;
  EXPECT_NE(out.find("retired: now gcn_vs_fastest_torch_csr"), std::string::npos) << out;
}

TEST_F(BenchCompare, NothingFlaggedWhenRatiosHoldAndOwnRatiosMeetTheirTargets) {
  json noisy = metric("s", "noisy", 8, "ratio");
  noisy["tolerance"] = 0.3;  // its RESULT line allows a 30% fall (its measured spread)
  const json before =
      run("2026-01-01T00:00:00+00:00",
          {metric("s", "peer", 10, "ratio"), metric("s", "own", 75, "own_ratio", 50),
           metric("s", "time_ms", 1, "absolute"), metric("s", "noisy", 10, "ratio")});
  json after = run("2026-01-02T00:00:00+00:00",
                   {metric("s", "peer", 10.5, "ratio"), metric("s", "own", 55, "own_ratio", 50),
                    metric("s", "time_ms", 100, "absolute"), noisy});
  int status = 0;
  const std::string out = compare(before, after, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(read(dir_ + "/flagged.txt"), "") << out;

  // Past its own tolerance, a noisy metric is flagged as any other.
  after["metrics"][3]["value"] = 6;
  const std::string out2 = compare(before, after, &status);
  EXPECT_EQ(status, 1) << out2;
  EXPECT_EQ(read(dir_ + "/flagged.txt"), "s s.noisy fell\n") << out2;
}

}  // namespace
}  // namespace dype
