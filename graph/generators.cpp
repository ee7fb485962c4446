#include "graph/generators.h"

#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <numbers>

#include "common/error.h"

namespace dype::kernels {

Xoshiro256::Xoshiro256(std::uint64_t seed) {
  SplitMix64 sm(seed);
  for (auto& s : s_) s = sm.next();
}

Xoshiro256::Xoshiro256(std::uint64_t seed, std::uint64_t stream)
    : Xoshiro256(SplitMix64(seed ^ SplitMix64(stream + 0x6A09E667F3BCC909ull).next()).next()) {}

std::uint64_t Xoshiro256::below(std::uint64_t n) {
  // Lemire: the high word of x * n is uniform in [0, n) once low words under 2^64 mod n are
  // rejected.
  unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

double Xoshiro256::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u is in (0, 1], so the log is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

namespace {

// Work is cut into chunks of this many edges / rows, each with its own stream, so the output does
// not depend on how many threads TBB uses.
constexpr std::int64_t kEdgeChunk = std::int64_t{1} << 16;
constexpr std::int64_t kRowChunk = 256;

// Stream ids: (purpose, round, chunk) packed so that no two uses share a stream.
std::uint64_t stream_id(std::uint64_t purpose, std::uint64_t round, std::uint64_t chunk) {
  return (purpose << 56) ^ (round << 40) ^ chunk;
}

constexpr std::uint64_t kUniformEdges = 1;
constexpr std::uint64_t kRmatEdges = 2;
constexpr std::uint64_t kRmatNoise = 3;
constexpr std::uint64_t kRmatPermute = 4;
constexpr std::uint64_t kFeatures = 5;
constexpr std::uint64_t kUniformDense = 6;

void check_counts(const char* where, std::int64_t nodes, std::int64_t edges) {
  if (nodes < 0) throw InputError(where, "node count " + std::to_string(nodes) + " is negative");
  if (edges < 0) throw InputError(where, "edge count " + std::to_string(edges) + " is negative");
  if (edges > 0 && nodes == 0) {
    throw InputError(where, std::to_string(edges) + " edges need at least one node");
  }
}

// Draws `count` keys with `draw(rng) -> uint64 key` into out[offset, offset + count), in parallel
// chunks with per-chunk streams.
template <typename Draw>
void draw_keys(std::vector<std::uint64_t>& out, std::size_t offset, std::int64_t count,
               std::uint64_t seed, std::uint64_t purpose, std::uint64_t round, const Draw& draw) {
  const std::int64_t chunks = (count + kEdgeChunk - 1) / kEdgeChunk;
  tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t chunk) {
    Xoshiro256 rng(seed, stream_id(purpose, round, static_cast<std::uint64_t>(chunk)));
    const std::int64_t begin = chunk * kEdgeChunk;
    const std::int64_t end = std::min(count, begin + kEdgeChunk);
    for (std::int64_t e = begin; e < end; ++e) out[offset + static_cast<std::size_t>(e)] = draw(rng);
  });
}

// Generates keys (src * nodes + dst) with `draw`; when unique, redraws the shortfall left by
// duplicates round after round until `edges` distinct keys exist (sorted).
template <typename Draw>
std::vector<std::uint64_t> generate_keys(std::int64_t edges, bool unique, std::uint64_t seed,
                                         std::uint64_t purpose, const Draw& draw) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(edges));
  draw_keys(keys, 0, edges, seed, purpose, 0, draw);
  if (!unique) return keys;
  tbb::parallel_sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  // Each round draws exactly the shortfall, so it can only add up to the target. The cap guards
  // against targets that the distribution can essentially never reach.
  constexpr std::uint64_t kMaxRounds = 1000;
  for (std::uint64_t round = 1; static_cast<std::int64_t>(keys.size()) < edges; ++round) {
    if (round > kMaxRounds) {
      throw Error("graph generator: only " + std::to_string(keys.size()) + " of " +
                  std::to_string(edges) + " distinct edges after " + std::to_string(kMaxRounds) +
                  " rounds; the target is too dense for this distribution");
    }
    const std::size_t have = keys.size();
    const std::int64_t missing = edges - static_cast<std::int64_t>(have);
    keys.resize(have + static_cast<std::size_t>(missing));
    draw_keys(keys, have, missing, seed, purpose, round, draw);
    tbb::parallel_sort(keys.begin() + static_cast<std::ptrdiff_t>(have), keys.end());
    std::inplace_merge(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(have), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return keys;
}

EdgeList decode_keys(const std::vector<std::uint64_t>& keys, std::int64_t nodes) {
  EdgeList g;
  g.num_nodes = nodes;
  g.src.resize(keys.size());
  g.dst.resize(keys.size());
  const auto n = static_cast<std::uint64_t>(nodes);
  tbb::parallel_for(std::size_t{0}, keys.size(), [&](std::size_t e) {
    g.src[e] = static_cast<std::int64_t>(keys[e] / n);
    g.dst[e] = static_cast<std::int64_t>(keys[e] % n);
  });
  return g;
}

void check_key_space(const char* where, std::int64_t nodes) {
  // Keys are src * nodes + dst in 64 bits.
  if (static_cast<long double>(nodes) * nodes > 1.8e19L) {
    throw InputError(where, std::to_string(nodes) + " nodes exceed the generator's 2^32 limit");
  }
}

// Dense targets (a quarter of all cells or more): Knuth's selection sampling visits every cell
// once and keeps exactly `edges` of them, sorted. O(cells) = O(edges) here.
EdgeList uniform_dense(std::int64_t nodes, std::int64_t edges, std::uint64_t seed,
                       bool self_loops) {
  EdgeList g;
  g.num_nodes = nodes;
  g.src.reserve(static_cast<std::size_t>(edges));
  g.dst.reserve(static_cast<std::size_t>(edges));
  Xoshiro256 rng(seed, stream_id(kUniformDense, 0, 0));
  const std::int64_t per_row = self_loops ? nodes : nodes - 1;
  std::int64_t remaining_cells = nodes * per_row;
  std::int64_t needed = edges;
  for (std::int64_t s = 0; s < nodes && needed > 0; ++s) {
    for (std::int64_t d = 0; d < nodes && needed > 0; ++d) {
      if (!self_loops && d == s) continue;
      if (static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(remaining_cells))) <
          needed) {
        g.src.push_back(s);
        g.dst.push_back(d);
        --needed;
      }
      --remaining_cells;
    }
  }
  return g;
}

}  // namespace

EdgeList generate_uniform(std::int64_t nodes, std::int64_t edges, std::uint64_t seed,
                          const UniformGraphOptions& options) {
  check_counts("generate_uniform", nodes, edges);
  if (edges == 0) return EdgeList{nodes, {}, {}, {}};
  if (!options.self_loops && nodes < 2) {
    throw InputError("generate_uniform", "edges without self-loops need at least 2 nodes");
  }
  check_key_space("generate_uniform", nodes);
  const auto n = static_cast<std::uint64_t>(nodes);
  if (options.unique) {
    const long double cells =
        static_cast<long double>(nodes) * (options.self_loops ? nodes : nodes - 1);
    if (static_cast<long double>(edges) > cells) {
      throw InputError("generate_uniform",
                       std::to_string(edges) + " distinct edges do not fit on " +
                           std::to_string(nodes) + " nodes (at most " +
                           std::to_string(static_cast<std::int64_t>(cells)) + ")");
    }
    if (4.0L * static_cast<long double>(edges) >= cells) {
      return uniform_dense(nodes, edges, seed, options.self_loops);
    }
  }
  const bool self_loops = options.self_loops;
  auto draw = [n, self_loops](Xoshiro256& rng) {
    const std::uint64_t s = rng.below(n);
    std::uint64_t d = 0;
    if (self_loops) {
      d = rng.below(n);
    } else {
      d = rng.below(n - 1);
      d += (d >= s) ? 1 : 0;  // skip the diagonal without rejection
    }
    return s * n + d;
  };
  return decode_keys(generate_keys(edges, options.unique, seed, kUniformEdges, draw), nodes);
}

EdgeList generate_uniform_density(std::int64_t nodes, double density, std::uint64_t seed,
                                  const UniformGraphOptions& options) {
  if (!(density >= 0.0 && density <= 1.0)) {
    throw InputError("generate_uniform_density",
                     "density " + std::to_string(density) + " is not in [0, 1]");
  }
  check_counts("generate_uniform_density", nodes, 0);
  const auto edges = static_cast<std::int64_t>(
      std::llround(density * static_cast<double>(nodes) * static_cast<double>(nodes)));
  return generate_uniform(nodes, edges, seed, options);
}

EdgeList generate_rmat(std::int64_t nodes, std::int64_t edges, std::uint64_t seed,
                       const RmatOptions& options) {
  check_counts("generate_rmat", nodes, edges);
  if (edges == 0) return EdgeList{nodes, {}, {}, {}};
  if (!options.self_loops && nodes < 2) {
    throw InputError("generate_rmat", "edges without self-loops need at least 2 nodes");
  }
  check_key_space("generate_rmat", nodes);
  const double p[4] = {options.a, options.b, options.c, options.d};
  double sum = 0;
  for (double v : p) {
    if (!(v >= 0.0) || !std::isfinite(v)) {
      throw InputError("generate_rmat", "quadrant probabilities must be finite and >= 0");
    }
    sum += v;
  }
  if (!(sum > 0.0)) throw InputError("generate_rmat", "quadrant probabilities sum to 0");
  if (!(options.noise >= 0.0 && options.noise <= 1.0)) {
    throw InputError("generate_rmat", "noise " + std::to_string(options.noise) +
                                          " is not in [0, 1]");
  }
  int scale = 0;
  while ((std::int64_t{1} << scale) < nodes) ++scale;

  // Per-level cumulative thresholds in 2^53 units (integer compares, identical on every platform).
  struct Level {
    std::uint64_t a, ab, abc;
  };
  std::vector<Level> levels(static_cast<std::size_t>(scale));
  Xoshiro256 noise_rng(seed, stream_id(kRmatNoise, 0, 0));
  const double a = p[0] / sum, b = p[1] / sum, c = p[2] / sum, d = p[3] / sum;
  for (auto& level : levels) {
    double la = a, lb = b, lc = c;
    if (options.noise > 0.0 && a + d > 0.0) {
      // Moves mass between the diagonal (a, d) and off-diagonal (b, c) quadrants, keeping the sum.
      const double mu = options.noise * std::min((a + d) / 2, b) * (2.0 * noise_rng.uniform() - 1);
      la = a - 2 * mu * a / (a + d);
      lb = b + mu;
      lc = c + mu;
      // d becomes d - 2 mu d / (a + d): implied by the three thresholds.
    }
    constexpr double kOne = 0x1.0p53;
    level.a = static_cast<std::uint64_t>(la * kOne);
    level.ab = static_cast<std::uint64_t>((la + lb) * kOne);
    level.abc = static_cast<std::uint64_t>((la + lb + lc) * kOne);
  }

  std::vector<std::int64_t> perm;
  if (options.permute) {
    perm.resize(static_cast<std::size_t>(nodes));
    for (std::int64_t v = 0; v < nodes; ++v) perm[static_cast<std::size_t>(v)] = v;
    Xoshiro256 rng(seed, stream_id(kRmatPermute, 0, 0));
    for (std::int64_t v = nodes - 1; v > 0; --v) {
      const auto j = rng.below(static_cast<std::uint64_t>(v) + 1);
      std::swap(perm[static_cast<std::size_t>(v)], perm[j]);
    }
  }

  const auto n = static_cast<std::uint64_t>(nodes);
  const bool self_loops = options.self_loops;
  auto draw = [&](Xoshiro256& rng) {
    for (;;) {
      std::uint64_t u = 0;
      std::uint64_t v = 0;
      for (const Level& level : levels) {
        const std::uint64_t r = rng.next() >> 11;
        const std::uint64_t bu = r >= level.ab ? 1 : 0;
        const std::uint64_t bv = (r >= level.a && r < level.ab) || r >= level.abc ? 1 : 0;
        u = (u << 1) | bu;
        v = (v << 1) | bv;
      }
      // Ids past `nodes` (when it is not a power of two) and unwanted loops are redrawn.
      if (u >= n || v >= n || (!self_loops && u == v)) continue;
      if (!perm.empty()) {
        u = static_cast<std::uint64_t>(perm[u]);
        v = static_cast<std::uint64_t>(perm[v]);
      }
      return u * n + v;
    }
  };
  return decode_keys(generate_keys(edges, options.unique, seed, kRmatEdges, draw), nodes);
}

// ---- Paper shapes -------------------------------------------------------------------------------

namespace {
struct PaperEntry {
  PaperDataset id;
  const char* name;
  const char* alias;
  std::int64_t nodes;
  std::int64_t edges;
  std::int64_t feature_len;
  GraphFamily family;
};
// DyPe Table I. The ogbn rows use the real datasets' exact counts (the table rounds them; its
// sparsity column matches arxiv's 169,343 nodes / 1,166,243 edges). S2's sparsity column
// (99.95274%) would imply ~25M edges; we keep its #Edge column, 15M.
constexpr PaperEntry kPaper[] = {
    {PaperDataset::s1, "S1", "synthetic1", 230'000, 120'000'000, 600, GraphFamily::uniform},
    {PaperDataset::s2, "S2", "synthetic2", 230'000, 15'000'000, 600, GraphFamily::uniform},
    {PaperDataset::s3, "S3", "synthetic3", 700'000, 15'000'000, 300, GraphFamily::uniform},
    {PaperDataset::s4, "S4", "synthetic4", 3'500'000, 5'000'000, 20, GraphFamily::uniform},
    {PaperDataset::ogbn_arxiv, "ogbn-arxiv", "OA", 169'343, 1'166'243, 128,
     GraphFamily::power_law},
    {PaperDataset::ogbn_products, "ogbn-products", "OP", 2'449'029, 61'859'140, 100,
     GraphFamily::power_law},
};

const PaperEntry& entry(PaperDataset dataset) {
  for (const auto& e : kPaper) {
    if (e.id == dataset) return e;
  }
  throw Error("unknown PaperDataset");
}

bool iequals(std::string_view x, std::string_view y) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(x[i])) !=
        std::tolower(static_cast<unsigned char>(y[i]))) {
      return false;
    }
  }
  return true;
}
}  // namespace

std::string_view to_string(PaperDataset dataset) { return entry(dataset).name; }

std::optional<PaperDataset> paper_dataset_from_string(std::string_view name) {
  for (const auto& e : kPaper) {
    if (iequals(name, e.name) || iequals(name, e.alias)) return e.id;
  }
  return std::nullopt;
}

GraphShape paper_shape(PaperDataset dataset, double scale_down, PaperScaling scaling) {
  if (!(scale_down > 0.0) || !std::isfinite(scale_down)) {
    throw InputError("paper_shape", "scale_down " + std::to_string(scale_down) +
                                        " must be a finite number > 0");
  }
  const PaperEntry& e = entry(dataset);
  GraphShape s;
  s.name = e.name;
  const double node_factor =
      scaling == PaperScaling::keep_density ? std::sqrt(scale_down) : scale_down;
  s.nodes = std::max<std::int64_t>(1, std::llround(static_cast<double>(e.nodes) / node_factor));
  s.edges = std::llround(static_cast<double>(e.edges) / scale_down);
  s.feature_len = e.feature_len;
  s.family = e.family;
  return s;
}

EdgeList generate_graph(const GraphShape& shape, std::uint64_t seed) {
  const long double cells = static_cast<long double>(shape.nodes) * shape.nodes;
  if (static_cast<long double>(shape.edges) > cells) {
    throw InputError(shape.name, std::to_string(shape.edges) + " edges on " +
                                     std::to_string(shape.nodes) +
                                     " nodes exceed the possible distinct edges; scale down "
                                     "less");
  }
  if (shape.family == GraphFamily::uniform) {
    return generate_uniform(shape.nodes, shape.edges, seed);
  }
  RmatOptions options;
  options.unique = true;
  return generate_rmat(shape.nodes, shape.edges, seed, options);
}

// ---- Features -----------------------------------------------------------------------------------

void fill_features(std::span<float> out, std::int64_t cols, std::uint64_t seed,
                   const FeatureOptions& options) {
  if (cols <= 0) {
    if (out.empty()) return;
    throw InputError("fill_features", "column count " + std::to_string(cols) + " must be > 0");
  }
  if (out.size() % static_cast<std::size_t>(cols) != 0) {
    throw InputError("fill_features", std::to_string(out.size()) +
                                          " values are not a whole number of rows of " +
                                          std::to_string(cols));
  }
  if (options.distribution == FeatureDistribution::uniform &&
      !(options.low <= options.high && std::isfinite(options.low) &&
        std::isfinite(options.high))) {
    throw InputError("fill_features", "uniform range [low, high) must be finite with low <= high");
  }
  if (options.distribution == FeatureDistribution::normal &&
      !(options.stddev >= 0.0f && std::isfinite(options.stddev) && std::isfinite(options.mean))) {
    throw InputError("fill_features", "normal needs a finite mean and stddev >= 0");
  }
  const auto rows = static_cast<std::int64_t>(out.size() / static_cast<std::size_t>(cols));
  const std::int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  tbb::parallel_for(std::int64_t{0}, chunks, [&](std::int64_t chunk) {
    Xoshiro256 rng(seed, stream_id(kFeatures, 0, static_cast<std::uint64_t>(chunk)));
    const auto begin = static_cast<std::size_t>(chunk * kRowChunk * cols);
    const auto end =
        static_cast<std::size_t>(std::min(rows, (chunk + 1) * kRowChunk) * cols);
    if (options.distribution == FeatureDistribution::uniform) {
      const double lo = options.low;
      const double span = static_cast<double>(options.high) - lo;
      for (std::size_t i = begin; i < end; ++i) {
        auto v = static_cast<float>(lo + span * rng.uniform());
        // Rounding to float may land exactly on `high`; keep the interval half-open.
        if (!(v < options.high) && options.low < options.high) {
          v = std::nextafter(options.high, options.low);
        }
        out[i] = v;
      }
    } else {
      for (std::size_t i = begin; i < end; ++i) {
        out[i] = static_cast<float>(options.mean + options.stddev * rng.normal());
      }
    }
  });
}

std::vector<float> generate_features(std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                                     const FeatureOptions& options) {
  if (rows < 0 || cols < 0) {
    throw InputError("generate_features", "shape [" + std::to_string(rows) + ", " +
                                              std::to_string(cols) + "] is negative");
  }
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  if (!x.empty()) fill_features(x, cols, seed, options);
  return x;
}

}  // namespace dype::kernels
