// The daemon's engine service planning on fitted performance models (configs/perfmodels/, written
// by dype-profile): plans say where their kernel times come from, answers stay exact, and a bad
// model folder or file is refused with its name.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "../test_temp_dir.h"
#include "kernels/error.h"
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

}  // namespace
