// dype-profile as an operator runs it without the device: `refit` renames a store's device model and
// sets its cache size, `validate --measured` compares a store with SpMM times measured elsewhere
// (one or several graphs), and a malformed CSV is refused with exit 2 naming file, line and field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../test_png.h"
#include "../test_run_cli.h"
#include "../test_temp_dir.h"
#include "graph/builders.h"
#include "graph/characteristics.h"
#include "graph/gather_locality.h"
#include "graph/mtx_reader.h"
#include "perfmodel/model_store.h"

namespace dype {
namespace {

namespace fs = std::filesystem;
using kernels::OpKind;

const std::string kProfile = std::string(DYPE_BINARY_DIR) + "/apps/dype-profile";
const std::string kSystem = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";

struct Files {
  fs::path dir, store, graph;
};

// An emulated GPU's SpMM store (timing-only: quick) refitted as a CUDA device's, and a small graph.
const Files& files() {
  static const Files f = [] {
    Files x;
    x.dir = test::process_temp_dir("dype_profile_cli");
    const fs::path emu = x.dir / "emu.json";
    const auto run = test::run_cli(kProfile, "run --system " + kSystem + " --device gpu0 --kernels spmm --budget 5s "
                                             "--max-points 60 --quiet --out " + emu.string());
    EXPECT_EQ(run.status, 0) << run.out;
    x.store = x.dir / "my-gpu.json";
    const auto refit = test::run_cli(kProfile, "refit " + emu.string() + " --feature-set spmm.gpu.v4 "
                                               "--device-model my-gpu --llc-bytes 4194304 --out " + x.store.string());
    EXPECT_EQ(refit.status, 0) << refit.out;
    x.graph = x.dir / "ring.mtx";
    std::ofstream g(x.graph);
    g << "%%MatrixMarket matrix coordinate pattern general\n3000 3000 6000\n";
    for (int i = 1; i <= 3000; ++i) g << i << " " << (i % 3000) + 1 << "\n" << i << " " << ((i * 7) % 3000) + 1 << "\n";
    return x;
  }();
  return f;
}

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = files().dir / name;
  std::ofstream(p) << text;
  return p;
}

TEST(DypeProfileCli, RefitSetsTheDeviceModelAndCache) {
  const auto j = nlohmann::json::parse(std::ifstream(files().store));
  EXPECT_EQ(j["device_model"], "my-gpu");
  EXPECT_EQ(j["models"]["spmm"]["feature_set"], "spmm.gpu.v4");
  EXPECT_EQ(j["models"]["spmm"]["params"]["llc_bytes"], 4194304.0);
  EXPECT_EQ(j["models"]["spmm"]["samples"].size(), 60u);  // samples kept
  EXPECT_EQ(j["provenance"], "modelled");
  const auto bad = test::run_cli(kProfile, "refit " + files().store.string() + " --feature-set spmm.cpu.v4 --out " +
                                               (files().dir / "x.json").string());
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--feature-set: 'spmm.cpu.v4' is not a spmm set for gpu devices"), std::string::npos)
      << bad.out;
}

// show --plot: the points as JSON beside a PNG that matplotlib drew from them; other names refused.
TEST(DypeProfileCli, ShowDrawsPredictedAgainstMeasuredAsAPng) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "python3-matplotlib is not installed (scripts/setup.sh installs it); plots not checked";
  const fs::path png = files().dir / "my-gpu.png";
  const auto r =
      test::run_cli(kProfile, "show " + files().store.string() + " --plot " + png.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const test::PngCheck c = test::check_png(png);
  EXPECT_TRUE(c.png) << png;
  EXPECT_GE(c.width, 300u);
  EXPECT_GE(c.height, 300u);
  EXPECT_GT(c.ink, 0.02) << "a blank plot";
  const auto data = nlohmann::json::parse(std::ifstream(files().dir / "my-gpu.plot.json"));
  EXPECT_NE(data["title"].get<std::string>().find("my-gpu"), std::string::npos) << data["title"];
  EXPECT_NE(data["subtitle"].get<std::string>().find("modelled"), std::string::npos)
      << data["subtitle"];
  ASSERT_EQ(data["panels"].size(), 1u);
  EXPECT_NE(data["panels"][0]["title"].get<std::string>().find("spmm"), std::string::npos);
  ASSERT_EQ(data["panels"][0]["points"].size(), 60u);  // every stored sample
  int held_out = 0;
  for (const auto& p : data["panels"][0]["points"]) {
    EXPECT_GT(p["measured_s"].get<double>(), 0);
    EXPECT_GT(p["predicted_s"].get<double>(), 0);
    held_out += p["holdout"].get<bool>();
  }
  EXPECT_GT(held_out, 0);

  const auto svg = test::run_cli(
      kProfile, "show " + files().store.string() + " --plot " + (files().dir / "m.svg").string());
  EXPECT_EQ(svg.status, 2) << svg.out;
  EXPECT_NE(svg.out.find("--plot: '" + (files().dir / "m.svg").string() + "' is not a .png file"),
            std::string::npos)
      << svg.out;
}

TEST(DypeProfileCli, ValidateAgainstMeasuredTimesNeedsNoDevice) {
  const fs::path csv = write("ring.csv", "N,measured_ms\n16,0.05\n128,0.08\n");
  const auto r = test::run_cli(kProfile, "validate " + files().store.string() + " --graph " + files().graph.string() +
                                             " --measured " + csv.string());
  ASSERT_EQ(r.status, 0) << r.out;
  // The MAPE printed is the store's own prediction against the file's times.
  const perf::ModelStore st = perf::ModelStore::load(files().store);
  const auto a = kernels::to_csr<std::int32_t>(kernels::read_mtx(files().graph.string(), {.read_values = false}),
                                               {.duplicates = kernels::DuplicateEdges::max, .symmetrize = true});
  double ape = 0;
  for (auto [n, ms] : {std::pair{16, 0.05}, std::pair{128, 0.08}}) {
    const kernels::OpShape s = kernels::spmm_shape(a.view(), n, kernels::degree_skew(a.indptr),
                                                   kernels::gather_locality(a.indices, a.cols));
    ape += std::abs(st.at(OpKind::spmm).predict(s).seconds - ms * 1e-3) / (ms * 1e-3) / 2;
  }
  char want[64];
  std::snprintf(want, sizeof want, "MAPE %.1f%%", ape * 100);
  EXPECT_NE(r.out.find(std::string("predicted (spmm.gpu.v4) of my-gpu on ") + files().graph.string() + ": " + want),
            std::string::npos)
      << want << "\n" << r.out;
  EXPECT_NE(r.out.find("   128       0.0800"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("MAPE per graph"), std::string::npos);  // one graph: no summary

  // Several graphs, each with its own times: a summary line per graph.
  const fs::path csv2 = write("ring2.csv", "N,measured_ms\n32,0.06\n");
  const auto two = test::run_cli(kProfile, "validate " + files().store.string() + " --graph " + files().graph.string() +
                                               " --measured " + csv.string() + " --graph " + files().graph.string() +
                                               " --measured " + csv2.string());
  ASSERT_EQ(two.status, 0) << two.out;
  EXPECT_NE(two.out.find("MAPE per graph"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("measured times: " + csv2.string()), std::string::npos) << two.out;
}

TEST(DypeProfileCli, BadMeasuredTimesExitTwoNamingFileLineAndField) {
  const std::string base = "validate " + files().store.string() + " --graph " + files().graph.string() + " --measured ";
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {"N,measured_ms\n16,0.05\n32,slow\n", ":3: field 'measured_ms' is 'slow', not a number"},
      {"N,time_ms\n16,0.05\n", ":1: header has no column 'measured_ms'"},
      {"N,measured_ms\n0,0.05\n", ":2: field 'N' is '0', expected a whole number > 0"},
      {"", ": empty: expected a header N,measured_ms"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const fs::path csv = write("bad" + std::to_string(i++) + ".csv", c.text);
    const auto r = test::run_cli(kProfile, base + csv.string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(csv.string() + c.message), std::string::npos) << r.out;
  }
  const auto missing = test::run_cli(kProfile, base + (files().dir / "none.csv").string());
  EXPECT_EQ(missing.status, 2) << missing.out;
  // One --measured per --graph.
  const fs::path ok = write("ok.csv", "N,measured_ms\n16,0.05\n");
  const auto uneven = test::run_cli(kProfile, base + ok.string() + " --graph " + files().graph.string());
  EXPECT_EQ(uneven.status, 2) << uneven.out;
  EXPECT_NE(uneven.out.find("--measured: 1 files for 2 --graph"), std::string::npos) << uneven.out;
}

}  // namespace
}  // namespace dype

namespace dype {
namespace {

// A validation on a device keeps what it measured (--save-measured DIR: <graph>.csv), and that CSV is
// what --measured reads: a store can be checked against it later on a machine without the device.
TEST(DypeProfileCli, ValidateSavesItsMeasuredTimesForMeasuredLater) {
  const fs::path dir = files().dir / "saved";
  fs::remove_all(dir);
  const fs::path emu = files().dir / "emu.json";  // the emulated MI210's store, gpu0 of kSystem
  const auto timed = test::run_cli(kProfile, "validate " + emu.string() + " --graph " + files().graph.string() +
                                                 " --system " + kSystem + " --device gpu0 --feature-lens 16,64 "
                                                 "--rounds 1 --refine-requests 1 --save-measured " + dir.string());
  ASSERT_EQ(timed.status, 0) << timed.out;
  const fs::path csv = dir / "ring.csv";
  ASSERT_TRUE(fs::exists(csv)) << timed.out;
  std::ifstream in(csv);
  std::string header, row16, row64;
  std::getline(in, header);
  std::getline(in, row16);
  std::getline(in, row64);
  EXPECT_EQ(header, "N,measured_ms");
  EXPECT_EQ(row16.rfind("16,", 0), 0u) << row16;
  EXPECT_EQ(row64.rfind("64,", 0), 0u) << row64;
  const auto later = test::run_cli(kProfile, "validate " + emu.string() + " --graph " + files().graph.string() +
                                                 " --measured " + csv.string());
  EXPECT_EQ(later.status, 0) << later.out;
  EXPECT_NE(later.out.find("times measured elsewhere"), std::string::npos) << later.out;
}

}  // namespace
}  // namespace dype
