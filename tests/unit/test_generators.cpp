// Synthetic graphs and features: reproducible per seed (and independent of the thread count),
// different across seeds, on target, power-law for R-MAT, and the DyPe Table I shapes.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "common/error.h"
#include "graph/characteristics.h"
#include "graph/generators.h"

namespace dype::kernels {
namespace {

bool same(const EdgeList& a, const EdgeList& b) {
  return a.num_nodes == b.num_nodes && a.src == b.src && a.dst == b.dst && a.weight == b.weight;
}

std::size_t distinct(const EdgeList& g) {
  std::set<std::pair<std::int64_t, std::int64_t>> s;
  for (std::int64_t e = 0; e < g.num_edges(); ++e) s.insert({g.src[e], g.dst[e]});
  return s.size();
}

void expect_in_range(const EdgeList& g) {
  for (std::int64_t e = 0; e < g.num_edges(); ++e) {
    ASSERT_GE(g.src[e], 0);
    ASSERT_LT(g.src[e], g.num_nodes);
    ASSERT_GE(g.dst[e], 0);
    ASSERT_LT(g.dst[e], g.num_nodes);
  }
}

TEST(Prng, KnownValuesPinTheStreamAcrossPlatforms) {
  // splitmix64 reference output for seed 0 (Vigna's splitmix64.c).
  SplitMix64 sm(0);
  EXPECT_EQ(sm.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(sm.next(), 0x6E789E6AA1B965F4ull);
  // Generated graphs are pinned by their own first edges so a change of stream is noticed.
  Xoshiro256 a(42);
  Xoshiro256 b(42);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next(), b.next());
  Xoshiro256 c(42, 1);
  Xoshiro256 d(42, 2);
  EXPECT_NE(c.next(), d.next());
}

TEST(Prng, BelowIsInRangeAndRoughlyUniform) {
  Xoshiro256 rng(7);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100000; ++i) {
    const auto v = rng.below(10);
    ASSERT_LT(v, 10u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(Uniform, SameSeedSameGraphDifferentSeedDifferentGraph) {
  const EdgeList a = generate_uniform(5000, 100000, 1);
  const EdgeList b = generate_uniform(5000, 100000, 1);
  const EdgeList c = generate_uniform(5000, 100000, 2);
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, c));
}

TEST(Uniform, IndependentOfThreadCount) {
  const EdgeList many = generate_uniform(3000, 300000, 9);
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  const EdgeList single = generate_uniform(3000, 300000, 9);
  EXPECT_TRUE(same(many, single));
}

TEST(Uniform, ExactDistinctEdgeCount) {
  const EdgeList g = generate_uniform(2000, 200000, 3);  // density 5%: duplicates are redrawn
  EXPECT_EQ(g.num_nodes, 2000);
  EXPECT_EQ(g.num_edges(), 200000);
  EXPECT_EQ(distinct(g), 200000u);
  expect_in_range(g);
  EXPECT_TRUE(std::is_sorted(g.src.begin(), g.src.end()));
}

TEST(Uniform, DensityTargetAndDensePath) {
  const EdgeList g = generate_uniform_density(1000, 0.01, 4);
  EXPECT_EQ(g.num_edges(), 10000);
  // Dense targets take the selection-sampling path: still exact and distinct.
  const EdgeList dense = generate_uniform_density(100, 0.6, 4);
  EXPECT_EQ(dense.num_edges(), 6000);
  EXPECT_EQ(distinct(dense), 6000u);
  expect_in_range(dense);
  const EdgeList full = generate_uniform_density(50, 1.0, 4);
  EXPECT_EQ(distinct(full), 2500u);
}

TEST(Uniform, DegreesAreNotSkewed) {
  const EdgeList g = generate_uniform(10000, 200000, 5);
  const GraphCharacteristics c = characterize(g);
  EXPECT_NEAR(c.mean_degree, 20.0, 1e-9);
  EXPECT_LT(c.degree_skew, 2.5);  // Poisson(20): max over 10k nodes is ~40
  EXPECT_LT(c.degree_gini, 0.15);
}

TEST(Uniform, NoSelfLoopsOption) {
  UniformGraphOptions opt;
  opt.self_loops = false;
  const EdgeList g = generate_uniform(50, 2000, 6, opt);
  for (std::int64_t e = 0; e < g.num_edges(); ++e) ASSERT_NE(g.src[e], g.dst[e]);
  const EdgeList dense = generate_uniform(20, 380, 6, opt);  // every off-diagonal cell
  EXPECT_EQ(distinct(dense), 380u);
  for (std::int64_t e = 0; e < dense.num_edges(); ++e) ASSERT_NE(dense.src[e], dense.dst[e]);
}

TEST(Uniform, NonUniqueKeepsGenerationOrderAndCount) {
  UniformGraphOptions opt;
  opt.unique = false;
  const EdgeList g = generate_uniform(10, 1000, 8, opt);
  EXPECT_EQ(g.num_edges(), 1000);
  EXPECT_LE(distinct(g), 100u);
}

TEST(Uniform, RejectsImpossibleTargets) {
  EXPECT_THROW(generate_uniform(10, 101, 1), InputError);
  EXPECT_THROW(generate_uniform(-1, 5, 1), InputError);
  EXPECT_THROW(generate_uniform(0, 5, 1), InputError);
  EXPECT_THROW(generate_uniform_density(10, 1.5, 1), InputError);
  EXPECT_EQ(generate_uniform(0, 0, 1).num_edges(), 0);
}

TEST(Rmat, ReproducibleAndSeedSensitive) {
  const EdgeList a = generate_rmat(1 << 12, 40000, 11);
  const EdgeList b = generate_rmat(1 << 12, 40000, 11);
  const EdgeList c = generate_rmat(1 << 12, 40000, 12);
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, c));
  EXPECT_EQ(a.num_edges(), 40000);
  expect_in_range(a);
}

TEST(Rmat, PowerLawSkew) {
  const EdgeList g = generate_rmat(1 << 14, 16 * (1 << 14), 13);
  const GraphCharacteristics in = characterize(g, DegreeKind::in);
  const GraphCharacteristics out = characterize(g, DegreeKind::out);
  // Graph500 parameters: the hubs have degrees in the hundreds against a mean of 16.
  EXPECT_GT(in.degree_skew, 15.0);
  EXPECT_GT(out.degree_skew, 15.0);
  EXPECT_GT(in.degree_gini, 0.5);
  EXPECT_GT(in.degree_cv, 1.5);
  // A uniform graph of the same size is nowhere near.
  const GraphCharacteristics flat = characterize(generate_uniform(1 << 14, 16 * (1 << 14), 13));
  EXPECT_GT(in.degree_skew, 5 * flat.degree_skew);
}

TEST(Rmat, NonPowerOfTwoNodesUniqueAndNoise) {
  RmatOptions opt;
  opt.unique = true;
  opt.noise = 0.1;
  opt.self_loops = false;
  const EdgeList g = generate_rmat(3000, 30000, 14, opt);
  EXPECT_EQ(g.num_nodes, 3000);
  EXPECT_EQ(g.num_edges(), 30000);
  EXPECT_EQ(distinct(g), 30000u);
  expect_in_range(g);
  for (std::int64_t e = 0; e < g.num_edges(); ++e) ASSERT_NE(g.src[e], g.dst[e]);
  RmatOptions plain = opt;
  plain.noise = 0.0;
  EXPECT_FALSE(same(g, generate_rmat(3000, 30000, 14, plain)));
  EXPECT_GT(characterize(g).degree_skew, 5.0);
}

TEST(Rmat, PermuteOffPutsHubsAtLowIds) {
  RmatOptions opt;
  opt.permute = false;
  const EdgeList g = generate_rmat(1 << 12, 50000, 15, opt);
  std::vector<std::int64_t> deg(static_cast<std::size_t>(g.num_nodes), 0);
  for (auto s : g.src) ++deg[static_cast<std::size_t>(s)];
  // Node 0 is the (a, a, ...) corner: the biggest hub.
  EXPECT_EQ(std::max_element(deg.begin(), deg.end()) - deg.begin(), 0);
}

TEST(Rmat, RejectsBadParameters) {
  RmatOptions opt;
  opt.a = -0.1;
  EXPECT_THROW(generate_rmat(100, 100, 1, opt), InputError);
  opt = {};
  opt.noise = 2.0;
  EXPECT_THROW(generate_rmat(100, 100, 1, opt), InputError);
}

TEST(PaperShapes, FullSizeMatchesTableI) {
  const GraphShape s1 = paper_shape(PaperDataset::s1);
  EXPECT_EQ(s1.nodes, 230000);
  EXPECT_EQ(s1.edges, 120000000);
  EXPECT_EQ(s1.feature_len, 600);
  EXPECT_NEAR(1.0 - s1.density(), 0.9977315, 1e-6);  // Table I sparsity 99.77315%
  EXPECT_EQ(paper_shape(PaperDataset::s2).edges, 15000000);
  EXPECT_EQ(paper_shape(PaperDataset::s3).nodes, 700000);
  EXPECT_EQ(paper_shape(PaperDataset::s3).feature_len, 300);
  const GraphShape s4 = paper_shape(PaperDataset::s4);
  EXPECT_EQ(s4.nodes, 3500000);
  EXPECT_EQ(s4.edges, 5000000);
  EXPECT_EQ(s4.feature_len, 20);
  const GraphShape oa = paper_shape(PaperDataset::ogbn_arxiv);
  EXPECT_EQ(oa.feature_len, 128);
  EXPECT_EQ(oa.family, GraphFamily::power_law);
  EXPECT_NEAR(1.0 - oa.density(), 0.9999593, 1e-7);  // Table I sparsity 99.99593%
  const GraphShape op = paper_shape(PaperDataset::ogbn_products);
  EXPECT_NEAR(static_cast<double>(op.nodes), 2.4e6, 0.1e6);
  EXPECT_NEAR(static_cast<double>(op.edges), 61e6, 1e6);
  EXPECT_EQ(op.feature_len, 100);
}

TEST(PaperShapes, ScaledShapesMaterialiseWithExactSizes) {
  struct Case {
    PaperDataset id;
    double scale;
  };
  for (const Case c : {Case{PaperDataset::s1, 300}, Case{PaperDataset::s2, 200},
                       Case{PaperDataset::s3, 200}, Case{PaperDataset::s4, 100},
                       Case{PaperDataset::ogbn_arxiv, 20}, Case{PaperDataset::ogbn_products, 500}}) {
    const GraphShape full = paper_shape(c.id);
    const GraphShape s = paper_shape(c.id, c.scale);
    EXPECT_EQ(s.nodes, std::llround(static_cast<double>(full.nodes) / c.scale)) << s.name;
    EXPECT_EQ(s.edges, std::llround(static_cast<double>(full.edges) / c.scale)) << s.name;
    EXPECT_EQ(s.feature_len, full.feature_len);
    const EdgeList g = generate_graph(s, 21);
    EXPECT_EQ(g.num_nodes, s.nodes) << s.name;
    EXPECT_EQ(g.num_edges(), s.edges) << s.name;
    EXPECT_EQ(distinct(g), static_cast<std::size_t>(s.edges)) << s.name;
    const GraphCharacteristics ch = characterize(g);
    EXPECT_NEAR(ch.density, s.density(), 1e-12);
    if (s.family == GraphFamily::power_law) {
      EXPECT_GT(ch.degree_skew, 8.0) << s.name;
    } else {
      // Binomial in-degrees: CV at most Poisson's 1 / sqrt(mean).
      EXPECT_LT(ch.degree_cv, 1.2 / std::sqrt(ch.mean_degree)) << s.name;
    }
  }
}

TEST(PaperShapes, KeepDensityScaling) {
  for (PaperDataset id : kAllPaperDatasets) {
    const GraphShape full = paper_shape(id);
    const GraphShape s = paper_shape(id, 10000, PaperScaling::keep_density);
    EXPECT_EQ(s.nodes, std::llround(static_cast<double>(full.nodes) / 100.0)) << s.name;
    EXPECT_EQ(s.edges, std::llround(static_cast<double>(full.edges) / 10000.0)) << s.name;
    EXPECT_NEAR(s.density() / full.density(), 1.0, 0.01) << s.name;
  }
  const GraphShape s1 = paper_shape(PaperDataset::s1, 10000, PaperScaling::keep_density);
  const EdgeList g = generate_graph(s1, 3);
  EXPECT_EQ(g.num_nodes, 2300);
  EXPECT_EQ(g.num_edges(), 12000);
}

TEST(PaperShapes, NamesAndOverScaling) {
  EXPECT_EQ(paper_dataset_from_string("s3"), PaperDataset::s3);
  EXPECT_EQ(paper_dataset_from_string("OA"), PaperDataset::ogbn_arxiv);
  EXPECT_EQ(paper_dataset_from_string("ogbn-products"), PaperDataset::ogbn_products);
  EXPECT_EQ(paper_dataset_from_string("s9"), std::nullopt);
  EXPECT_EQ(to_string(PaperDataset::s1), "S1");
  EXPECT_THROW(paper_shape(PaperDataset::s1, 0.0), InputError);
  // S1 / 10000: 23 nodes cannot hold 12000 distinct edges.
  EXPECT_THROW(generate_graph(paper_shape(PaperDataset::s1, 10000), 1), InputError);
}

TEST(Features, ReproducibleShapedAndDistributed) {
  const auto a = generate_features(1000, 64, 5);
  const auto b = generate_features(1000, 64, 5);
  const auto c = generate_features(1000, 64, 6);
  ASSERT_EQ(a.size(), 64000u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double sum = 0;
  for (float v : a) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / static_cast<double>(a.size()), 0.0, 0.02);

  FeatureOptions opt;
  opt.distribution = FeatureDistribution::normal;
  opt.mean = 3.0f;
  opt.stddev = 2.0f;
  const auto n = generate_features(2000, 50, 7, opt);
  double m = 0;
  double sq = 0;
  for (float v : n) {
    m += v;
    sq += static_cast<double>(v) * v;
  }
  m /= static_cast<double>(n.size());
  const double sd = std::sqrt(sq / static_cast<double>(n.size()) - m * m);
  EXPECT_NEAR(m, 3.0, 0.05);
  EXPECT_NEAR(sd, 2.0, 0.05);
}

TEST(Features, FillMatchesGenerateAndThreadCount) {
  const auto a = generate_features(700, 33, 8);
  std::vector<float> b(700 * 33);
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    fill_features(b, 33, 8);
  }
  EXPECT_EQ(a, b);
  std::vector<float> odd(10);
  EXPECT_THROW(fill_features(odd, 3, 1), InputError);
}

}  // namespace
}  // namespace dype::kernels
