// The gather-locality curve (graph/gather_locality.h) against an exact LRU cache
// simulation of the same column trace: footprint theory plus hash sampling must agree with what an
// LRU cache of each size really misses, on random, skewed, local and cyclic traces.
#include "graph/gather_locality.h"

#include <gtest/gtest.h>

#include <cmath>
#include <list>
#include <random>
#include <unordered_map>
#include <vector>

namespace dype::kernels {
namespace {

// Miss ratio of an LRU cache of `capacity` rows over the trace: the reference.
double lru_miss_ratio(const std::vector<std::int32_t>& trace, std::size_t capacity) {
  std::list<std::int32_t> order;
  std::unordered_map<std::int32_t, std::list<std::int32_t>::iterator> where;
  std::size_t misses = 0;
  for (std::int32_t c : trace) {
    auto it = where.find(c);
    if (it != where.end()) {
      order.splice(order.begin(), order, it->second);
      continue;
    }
    ++misses;
    order.push_front(c);
    where[c] = order.begin();
    if (order.size() > capacity) {
      where.erase(order.back());
      order.pop_back();
    }
  }
  return static_cast<double>(misses) / static_cast<double>(trace.size());
}

std::vector<std::int32_t> uniform_trace(std::int32_t cols, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int32_t> pick(0, cols - 1);
  std::vector<std::int32_t> t(n);
  for (auto& c : t) c = pick(gen);
  return t;
}

// Zipf-like: a few hub columns take most gathers (symmetrised power-law graphs).
std::vector<std::int32_t> skewed_trace(std::int32_t cols, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<double> w(static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 1.0 / std::pow(static_cast<double>(i + 1), 0.9);
  std::discrete_distribution<std::int32_t> pick(w.begin(), w.end());
  // Scatter the hubs over the id range so ids carry no order.
  std::vector<std::int32_t> perm(static_cast<std::size_t>(cols));
  for (std::int32_t i = 0; i < cols; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::shuffle(perm.begin(), perm.end(), gen);
  std::vector<std::int32_t> t(n);
  for (auto& c : t) c = perm[static_cast<std::size_t>(pick(gen))];
  return t;
}

// Rows walked in order, each gathering near its own id: a community-ordered graph.
std::vector<std::int32_t> local_trace(std::int32_t cols, std::size_t n, std::int32_t reach, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int32_t> off(-reach, reach);
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto row = static_cast<std::int32_t>(static_cast<double>(i) / static_cast<double>(n) * cols);
    t[i] = std::clamp(row + off(gen), 0, cols - 1);
  }
  return t;
}

void expect_matches_lru(const std::vector<std::int32_t>& trace, std::int32_t cols, double tolerance) {
  const GatherLocality g = gather_locality(trace, cols);
  ASSERT_TRUE(g.known());
  for (int i = 0; i < GatherLocality::kLevels; ++i) {
    const double cap = GatherLocality::rows(i);
    if (cap > 4.0 * cols) break;  // beyond every touched row: compulsory only, checked below
    const double ref = lru_miss_ratio(trace, static_cast<std::size_t>(cap));
    EXPECT_NEAR(g.miss[static_cast<std::size_t>(i)], ref, tolerance) << "cache of " << cap << " rows";
  }
}

TEST(GatherLocality, UniformTraceMatchesLruAndTheUniformCurve) {
  const auto t = uniform_trace(20000, 400000, 1);
  expect_matches_lru(t, 20000, 0.02);
  const GatherLocality g = gather_locality(t, 20000);
  const GatherLocality u = GatherLocality::uniform(20000, 400000);
  for (int i = 0; i < GatherLocality::kLevels; ++i)
    EXPECT_NEAR(g.miss[static_cast<std::size_t>(i)], u.miss[static_cast<std::size_t>(i)], 0.03) << i;
}

TEST(GatherLocality, SkewedTraceMatchesLru) { expect_matches_lru(skewed_trace(20000, 400000, 2), 20000, 0.02); }

TEST(GatherLocality, LocalTraceMatchesLruAndMissesFarLessThanRandomIds) {
  const auto t = local_trace(50000, 500000, 200, 3);
  expect_matches_lru(t, 50000, 0.02);
  const GatherLocality g = gather_locality(t, 50000);
  // 401 candidate columns around each row: a 1024-row cache holds the neighbourhood.
  EXPECT_LT(g.miss_at(1024), 0.15);
  EXPECT_GT(GatherLocality::uniform(50000, 500000).miss_at(1024), 0.9);
}

TEST(GatherLocality, SampledColumnsStillMatchLru) {
  // 2M columns: about one in eight is sampled.
  const auto t = skewed_trace(2000000, 3000000, 4);
  expect_matches_lru(t, 2000000, 0.03);
}

TEST(GatherLocality, CyclicTraceMissesUntilEveryColumnFits) {
  std::vector<std::int32_t> t;
  for (int rep = 0; rep < 20; ++rep)
    for (std::int32_t c = 0; c < 3000; ++c) t.push_back(c);
  const GatherLocality g = gather_locality(t, 3000);
  EXPECT_NEAR(g.miss_at(1024), 1.0, 0.02);   // LRU thrashes below the cycle length
  EXPECT_NEAR(g.miss_at(16384), 0.05, 0.01);  // only the first pass misses (3000 / 60000)
}

TEST(GatherLocality, EmptyTraceNeverMissesAndShapeOnlyIsUnknown) {
  const GatherLocality g = gather_locality({}, 100);
  EXPECT_TRUE(g.known());
  EXPECT_EQ(g.miss_at(64), 0.0);
  EXPECT_FALSE(OpShape{}.locality.known());
}

TEST(GatherLocality, MissAtInterpolatesMonotonically) {
  const GatherLocality g = gather_locality(skewed_trace(20000, 200000, 5), 20000);
  double prev = 1.0;
  for (double rows = 1; rows < 1e7; rows *= 1.7) {
    const double m = g.miss_at(rows);
    EXPECT_LE(m, prev + 1e-9) << rows;
    EXPECT_GE(m, 0.0);
    prev = m;
  }
}

}  // namespace
}  // namespace dype::kernels
