#pragma once
// Seeded synthetic graphs and features, reproducible across runs, thread counts, compilers and
// platforms: all randomness comes from our own splitmix64/xoshiro256** streams (std::
// distributions differ between standard libraries), and parallel work is cut into fixed-size
// chunks, each with its own stream derived from (seed, chunk), so the thread count never changes
// the output.
//
//   EdgeList g = generate_rmat(1 << 16, 1 << 20, /*seed=*/42);            // Graph500 R-MAT
//   GraphShape s1 = paper_shape(PaperDataset::s1, /*scale_down=*/1000);   // DyPe Table I, small
//   EdgeList g1 = generate_graph(s1, 7);
//   std::vector<float> x = generate_features(s1.nodes, s1.feature_len, 7);
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/edge_list.h"

namespace dype::kernels {

// splitmix64: seeds other generators and derives per-chunk streams.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

// xoshiro256** (Blackman & Vigna): fast, 256-bit state, passes BigCrush.
class Xoshiro256 {
 public:
  explicit Xoshiro256(std::uint64_t seed);
  // Stream `stream` of `seed`: independent generators for parallel chunks.
  Xoshiro256(std::uint64_t seed, std::uint64_t stream);

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0, unbiased (Lemire's multiply-shift with rejection).
  std::uint64_t below(std::uint64_t n);
  // Standard normal (Box-Muller; uses std::log/sqrt/cos, correctly rounded in glibc).
  double normal();

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// ---- Uniform random graphs ----------------------------------------------------------------------

struct UniformGraphOptions {
  bool self_loops = true;  // allow i -> i
  bool unique = true;      // no repeated (src, dst); the edge count is then exact distinct edges
};

// `edges` edges among `nodes` nodes, each (src, dst) equally likely (Erdos-Renyi G(n, m) when
// unique). Unique output is sorted by (src, dst). Throws InputError if unique edges cannot fit.
EdgeList generate_uniform(std::int64_t nodes, std::int64_t edges, std::uint64_t seed,
                          const UniformGraphOptions& options = {});
// Same with a target density nnz / nodes^2 (edges = round(density * nodes^2)).
EdgeList generate_uniform_density(std::int64_t nodes, double density, std::uint64_t seed,
                                  const UniformGraphOptions& options = {});

// ---- R-MAT / Kronecker power-law graphs ---------------------------------------------------------

struct RmatOptions {
  // Quadrant probabilities; Graph500 defaults. They are normalised to sum to 1.
  double a = 0.57;
  double b = 0.19;
  double c = 0.19;
  double d = 0.05;
  // Per-level noise in [0, 1] (Seshadhri, Pinar & Kolda's smoothing of the degree distribution's
  // oscillations); 0 = plain R-MAT.
  double noise = 0.0;
  // Shuffle node labels (as Graph500 does) so id order does not reveal degree.
  bool permute = true;
  bool self_loops = true;
  // No repeated (src, dst): duplicates are redrawn, so the edge count is exact distinct edges.
  bool unique = false;
};

// R-MAT on `nodes` nodes (need not be a power of two: draws outside are redrawn).
EdgeList generate_rmat(std::int64_t nodes, std::int64_t edges, std::uint64_t seed,
                       const RmatOptions& options = {});

// ---- The DyPe paper's Table I dataset shapes ----------------------------------------------------

enum class PaperDataset : std::uint8_t { s1, s2, s3, s4, ogbn_arxiv, ogbn_products };
enum class GraphFamily : std::uint8_t { uniform, power_law };

inline constexpr PaperDataset kAllPaperDatasets[] = {
    PaperDataset::s1,         PaperDataset::s2,         PaperDataset::s3,
    PaperDataset::s4,         PaperDataset::ogbn_arxiv, PaperDataset::ogbn_products};

// A graph's characteristics without its edges: enough for timing-only runs and perf models.
struct GraphShape {
  std::string name;
  std::int64_t nodes = 0;
  std::int64_t edges = 0;
  std::int64_t feature_len = 0;
  GraphFamily family = GraphFamily::uniform;
  double density() const {
    return nodes > 0 ? static_cast<double>(edges) / (static_cast<double>(nodes) * nodes) : 0.0;
  }
};

// How paper_shape shrinks a dataset. nodes_and_edges divides both by the factor (density grows by
// it, so S1 cannot shrink past ~440x); keep_density divides nodes by sqrt(factor) and edges by the
// factor, keeping nnz / nodes^2 (the sparsity the paper's schedules depend on).
enum class PaperScaling : std::uint8_t { nodes_and_edges, keep_density };

// Table I shape scaled down by scale_down (> 0; 1 = full size). Feature length is not scaled.
GraphShape paper_shape(PaperDataset dataset, double scale_down = 1.0,
                       PaperScaling scaling = PaperScaling::nodes_and_edges);
std::string_view to_string(PaperDataset dataset);  // "S1".."S4", "ogbn-arxiv", "ogbn-products"
// Accepts the names above, case-insensitively, and the paper's abbreviations "OA" / "OP".
std::optional<PaperDataset> paper_dataset_from_string(std::string_view name);

// Materialises a shape: uniform family -> generate_uniform (unique), power_law -> generate_rmat
// (Graph500 parameters, unique). Exactly shape.edges distinct edges on shape.nodes nodes.
EdgeList generate_graph(const GraphShape& shape, std::uint64_t seed);

// ---- Dense features -----------------------------------------------------------------------------

enum class FeatureDistribution : std::uint8_t { uniform, normal };

struct FeatureOptions {
  FeatureDistribution distribution = FeatureDistribution::uniform;
  float low = -1.0f;  // uniform in [low, high)
  float high = 1.0f;
  float mean = 0.0f;  // normal(mean, stddev)
  float stddev = 1.0f;
};

// Row-major FP32 [rows, cols].
std::vector<float> generate_features(std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                                     const FeatureOptions& options = {});
// Fills caller-owned row-major [out.size() / cols, cols] storage; same values as above.
void fill_features(std::span<float> out, std::int64_t cols, std::uint64_t seed,
                   const FeatureOptions& options = {});

}  // namespace dype::kernels
