// Incremental inference against PyTorch: tests/scripts/pyg_reference.py writes a GCN, GIN or
// GraphSAGE (PyG's layers in plain PyTorch, its weights under PyG's names) with a random graph;
// dype keeps the model's activations over that graph, applies 1,000 random updates (edges added
// and removed, nodes added, feature rows set), and its answer over the final graph must equal
// what PyTorch computes on that final graph with the same weights, within 1e-4. Skips, saying
// so, where Debian's python3-torch is not installed (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "../test_temp_dir.h"
#include "runtime/incremental/dynamic_graph.h"
#include "runtime/incremental/incremental_gnn.h"
#include "runtime/repository/model_repository.h"

namespace dype::rt {
namespace {

nlohmann::json run_reference(const std::filesystem::path& dir, const std::string& name, const std::string& args) {
  const std::string cmd = "/usr/bin/python3 " + std::string(DYPE_SOURCE_DIR) + "/tests/scripts/pyg_reference.py " +
                          args + " --dir " + dir.string() + " --name " + name;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  std::ifstream in(dir / (name + ".case.json"));
  return nlohmann::json::parse(in);
}

void check_family(const std::string& family, const std::string& extra) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-torch is not installed (Debian package; scripts/setup.sh installs it)";
  const auto dir = test::process_temp_dir("dype-incremental-torch");
  const std::string args = "--family " + family + " --in 12 --hidden 16 --out 5 --nodes 120 --edges 600 " + extra;
  const nlohmann::json start = run_reference(dir, family, args);
  const RepositoryModel model = ModelRepository({dir.string()}).load(family);
  const std::int64_t f = start.at("in").get<std::int64_t>();
  kernels::EdgeList edges;
  edges.num_nodes = start.at("nodes").get<std::int64_t>();
  edges.src = start.at("src").get<std::vector<std::int64_t>>();
  edges.dst = start.at("dst").get<std::vector<std::int64_t>>();
  DynamicGraph g(edges, make_tensor(edges.num_nodes, f, start.at("x").get<std::vector<float>>()));
  IncrementalGnn gnn(model.model, g);

  std::mt19937_64 rng(5);
  std::vector<std::pair<std::int64_t, std::int64_t>> present;
  for (std::size_t e = 0; e < edges.src.size(); ++e) present.emplace_back(edges.src[e], edges.dst[e]);
  auto value = [&] { return static_cast<float>(rng() % 2000) / 1000.0f - 1.0f; };
  for (int step = 0; step < 1000; ++step) {
    GraphUpdate u;
    const std::int64_t n = g.nodes();
    const int kind = static_cast<int>(rng() % 8);
    if (kind == 0) {
      u.add_nodes = 1;
      for (std::int64_t c = 0; c < f; ++c) u.add_x.push_back(value());
    } else if (kind == 1) {
      u.set_rows = {static_cast<std::int64_t>(rng() % n)};
      for (std::int64_t c = 0; c < f; ++c) u.set_x.push_back(value());
    } else if (kind <= 4 && !present.empty()) {
      const std::size_t at = rng() % present.size();
      u.remove_src = {present[at].first};
      u.remove_dst = {present[at].second};
      present[at] = present.back();
      present.pop_back();
    }
    const std::int64_t m = n + u.add_nodes;
    const std::int64_t s = static_cast<std::int64_t>(rng() % m), d = rng() % 10 == 0 ? s : static_cast<std::int64_t>(rng() % m);
    u.add_src = {s};
    u.add_dst = {d};
    present.emplace_back(s, d);
    gnn.update(g, g.apply(u));
  }
  // The final graph to PyTorch, the same weights (the same seed) computing on it.
  const kernels::EdgeList last = g.edge_list();
  nlohmann::json given = {{"nodes", last.num_nodes}, {"src", last.src}, {"dst", last.dst}, {"x", g.features().data}};
  std::ofstream(dir / "final.json") << given.dump();
  const nlohmann::json done = run_reference(dir / "final", family, args + " --graph " + (dir / "final.json").string());
  const HostTensor expected =
      make_tensor(last.num_nodes, done.at("out").get<std::int64_t>(), done.at("expected").get<std::vector<float>>());
  EXPECT_EQ(g.version(), 1000u);
  EXPECT_GT(g.nodes(), edges.num_nodes);
  EXPECT_LE(relative_error(gnn.output(), expected), 1e-4) << family << " vs PyTorch " << done.at("torch");
}

TEST(IncrementalPytorch, GcnAfterThousandUpdatesEqualsPytorchOnTheFinalGraph) { check_family("gcn", ""); }
TEST(IncrementalPytorch, GinAfterThousandUpdatesEqualsPytorchOnTheFinalGraph) { check_family("gin", "--eps 0.2"); }
TEST(IncrementalPytorch, SageAfterThousandUpdatesEqualsPytorchOnTheFinalGraph) { check_family("sage", ""); }

}  // namespace
}  // namespace dype::rt
