// The daemon's engine service planning on fitted performance models (configs/perfmodels/, written
// by dype-profile): plans say where their kernel times come from, answers stay exact, and a bad
// model folder or file is refused with its name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../test_temp_dir.h"
#include "common/error.h"
#include "runtime/daemon/engine_service.h"

using namespace dype;
using namespace dype::rt::daemon;

namespace {

EngineServiceOptions options(const std::string& perfmodels_dir) {
  EngineServiceOptions o;
  o.system_config = std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml";
  rt::ModelSpec gcn{.family = rt::ModelFamily::gcn, .layers = 2, .in_features = 8, .hidden = 16, .seed = 7};
  o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 500, .feature_len = 8}}};
  o.perfmodels_dir = perfmodels_dir;
  return o;
}

rt::Request request(std::uint64_t seed) {
  const kernels::EdgeList el = rt::random_graph(60, 240, seed);
  std::vector<float> x(60 * 8);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i + seed));
  return rt::Request::gnn(rt::Graph::from_edges(el, true), rt::make_tensor(60, 8, x));
}

TEST(EngineServicePerfModels, PlansOnFittedModelsAndSaysSo) {
  EngineService fitted(options(std::string(DYPE_SOURCE_DIR) + "/configs/perfmodels"));
  EXPECT_NE(fitted.cost_source().find("amd-mi210: fitted perf model (spmm,gemm"), std::string::npos)
      << fitted.cost_source();
  EXPECT_NE(fitted.cost_source().find("xilinx-u280: fitted perf model (spmm"), std::string::npos)
      << fitted.cost_source();
  EXPECT_EQ(fitted.plan("gcn")["cost_source"], fitted.cost_source());
  EngineService own(options(""));
  EXPECT_EQ(own.plan("gcn")["cost_source"], "device models");
  // Same answers whichever model planned the pipeline.
  for (std::uint64_t s = 1; s <= 3; ++s) {
    const rt::HostTensor a = fitted.infer("gcn", request(s)).get();
    const rt::HostTensor b = own.infer("gcn", request(s)).get();
    ASSERT_EQ(a.data.size(), b.data.size());
    for (std::size_t i = 0; i < a.data.size(); ++i) ASSERT_NEAR(a.data[i], b.data[i], 1e-5f * (1.0f + std::fabs(b.data[i])));
  }
}

TEST(EngineServicePerfModels, BadFolderOrFileIsNamed) {
  try {
    EngineService s(options("/nonexistent/perfmodels"));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/perfmodels: not a directory"), std::string::npos) << e.what();
  }
  const auto dir = dype::test::process_temp_dir("dype_perfmodels_bad");
  std::ofstream(dir / "amd-mi210.json") << "{\"format\": \"dype-perfmodel\", \"models\": [";
  try {
    EngineService s(options(dir.string()));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("amd-mi210.json"), std::string::npos) << e.what();
  }
}

bool has_line(const std::vector<std::string>& lines, const std::string& needle) {
  for (const std::string& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}
std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// --state-dir: what the planners learnt from launches is saved and restored by the next start; a
// file refined on another host is restored with lowered trust, one for another fit or a damaged one
// is ignored and the model still serves.
TEST(EngineServicePerfModels, RefinementsSurviveARestart) {
  const auto dir = dype::test::process_temp_dir("dype_refined_state");
  std::filesystem::remove_all(dir);
  const std::string perf = std::string(DYPE_SOURCE_DIR) + "/configs/perfmodels";
  EngineServiceOptions o = options(perf);
  o.state_dir = dir.string();
  std::uint64_t accepted = 0;
  {
    EngineService a(o);
    EXPECT_TRUE(a.refined_notes().empty()) << join(a.refined_notes());
    for (std::uint64_t s = 1; s <= 12; ++s) a.infer("gcn", request(s)).get();
    const auto saved = a.save_refined();
    ASSERT_EQ(saved.size(), 1u);
    EXPECT_NE(saved[0].find("gcn: "), std::string::npos) << saved[0];
  }
  const std::string file = (dir / "refined" / "gcn.json").string();
  nlohmann::json j = nlohmann::json::parse(std::ifstream(file));
  EXPECT_EQ(j["format"], "dype-refined-models");
  for (const auto& st : j["stores"])
    for (const auto& [k, m] : st["models"].items()) accepted += m["refinement"]["accepted"].get<std::uint64_t>();
  ASSERT_GT(accepted, 0u) << "no launch refined a model";

  {
    EngineService b(o);
    EXPECT_TRUE(has_line(b.refined_notes(), "gcn: amd-mi210 refinement restored (")) << join(b.refined_notes());
    // What b saves carries the restored refinements on (nothing is lost by a restart).
    b.save_refined();
    std::uint64_t again = 0;
    const nlohmann::json k = nlohmann::json::parse(std::ifstream(file));
    for (const auto& st : k["stores"])
      for (const auto& [n, m] : st["models"].items()) again += m["refinement"]["accepted"].get<std::uint64_t>();
    EXPECT_GE(again, accepted);
  }

  j["host"] = "elsewhere";
  std::ofstream(file) << j.dump();
  {
    EngineService c(o);
    EXPECT_TRUE(has_line(c.refined_notes(), "warning: gcn: amd-mi210 refinement was made on host 'elsewhere'"))
        << join(c.refined_notes());
    EXPECT_TRUE(has_line(c.refined_notes(), "restored with lowered trust")) << join(c.refined_notes());
  }

  // Another fit: the perf models profiled again since the save.
  const auto refit = dir / "perfmodels";
  std::filesystem::create_directories(refit);
  for (const char* f : {"amd-mi210.json", "xilinx-u280.json"}) std::filesystem::copy_file(perf + "/" + f, refit / f);
  nlohmann::json mi = nlohmann::json::parse(std::ifstream(refit / "amd-mi210.json"));
  mi["models"]["spmm"]["coefficients"][0] = mi["models"]["spmm"]["coefficients"][0].get<double>() * 1.5;
  std::ofstream(refit / "amd-mi210.json") << mi.dump();
  {
    EngineServiceOptions r = o;
    r.perfmodels_dir = refit.string();
    EngineService d(r);
    EXPECT_TRUE(has_line(d.refined_notes(), "gcn: amd-mi210 refinement ignored: the fitted model changed"))
        << join(d.refined_notes());
  }

  std::ofstream(file) << "{\"format\": \"dype-refined-models\", \"stores\": [";
  EngineService e(o);
  EXPECT_TRUE(has_line(e.refined_notes(), "warning: gcn: refined models ignored:")) << join(e.refined_notes());
  EXPECT_EQ(e.infer("gcn", request(99)).get().rows, 60);
}

// /metrics says how busy each device was: the plan's devices by both clocks, the others not at all,
// utilisation within [0, 1] on each clock.
TEST(EngineServicePerfModels, MetricsSayHowBusyEachDeviceWas) {
  EngineService s(options(""));
  for (std::uint64_t i = 1; i <= 6; ++i) s.infer("gcn", request(i)).get();
  const std::string text = s.metrics_text();
  const std::string plan = s.plan("gcn")["pipeline"];  // "0-1:gpu0 | 2-3:gpu1"
  std::map<std::string, double> measured, modelled, utilisation_measured, utilisation_modelled;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto d0 = line.find("device=\"");
    if (d0 == std::string::npos) continue;
    const std::string device = line.substr(d0 + 8, line.find('"', d0 + 8) - d0 - 8);
    const double v = std::stod(line.substr(line.rfind(' ') + 1));
    const bool is_modelled = line.find("source=\"modelled\"") != std::string::npos;
    if (line.rfind("dype_device_busy_seconds_total{", 0) == 0) (is_modelled ? modelled : measured)[device] = v;
    if (line.rfind("dype_device_utilization{", 0) == 0) (is_modelled ? utilisation_modelled : utilisation_measured)[device] = v;
  }
  ASSERT_FALSE(measured.empty()) << text;
  for (const auto& [device, busy] : measured) {
    const bool used = plan.find(device) != std::string::npos;
    EXPECT_EQ(busy > 0, used) << device << " in " << plan << "\n" << text;
    if (modelled.count(device)) {
      EXPECT_EQ(modelled[device] > 0, used) << device << "\n" << text;
    }
  }
  for (const auto* u : {&utilisation_measured, &utilisation_modelled})
    for (const auto& [device, v] : *u) {
      EXPECT_GE(v, 0.0) << device;
      EXPECT_LE(v, 1.0) << device << "\n" << text;
    }
  EXPECT_NE(text.find("dype_engine_requests_total{model=\"gcn\",result=\"cancelled\"} 0"), std::string::npos) << text;
}

}  // namespace
