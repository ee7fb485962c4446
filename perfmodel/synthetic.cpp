#include "perfmodel/synthetic.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <tbb/parallel_for.h>

#include "common/error.h"
#include "perfmodel/features.h"

namespace dype::perf {
namespace {

using kernels::OpKind;
using kernels::OpShape;

// splitmix64: fast, good enough for synthetic sparsity patterns, deterministic across platforms.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double log_uniform(double lo, double hi) {
    return std::exp(std::log(lo) + uniform() * (std::log(hi) - std::log(lo)));
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
};

std::int64_t round_to(double v, std::int64_t multiple) {
  return std::max<std::int64_t>(multiple, static_cast<std::int64_t>(std::llround(v / multiple)) * multiple);
}

// A feature length log-uniform over the SpMM range; with probability aligned_feature_share rounded
// to a multiple of feature_align. The extra draw happens only when the share is set, so ranges
// without it draw the same specs as before.
std::int64_t draw_feature_length(const SyntheticRanges& r, Rng& rng) {
  const double v = rng.log_uniform(r.feature_min, r.feature_max);
  if (r.aligned_feature_share > 0 && r.feature_align > 1 && rng.uniform() < r.aligned_feature_share)
    return round_to(v, r.feature_align);
  return static_cast<std::int64_t>(std::llround(v));
}

OpShape draw(OpKind kind, const SyntheticRanges& r, Rng& rng, InputSpec& spec) {
  OpShape s;
  s.kind = kind;
  switch (kind) {
    case OpKind::spmm: {
      s.m = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.rows_min, r.rows_max)));
      s.k = s.m;  // graph adjacency: square
      s.n = draw_feature_length(r, rng);
      // At least one nonzero per row on average: sparser graphs are not meaningful GNN inputs.
      const double dmin = std::max(r.density_min, 1.0 / static_cast<double>(s.m));
      const double dmax = std::max(dmin, r.density_max);
      const double density = rng.log_uniform(dmin, dmax);
      s.nnz = std::max<std::int64_t>(s.m, std::llround(density * static_cast<double>(s.m) *
                                                        static_cast<double>(s.k)));
      spec.degrees = rng.uniform() < r.power_law_share ? DegreeDistribution::power_law
                                                        : DegreeDistribution::uniform;
      if (rng.uniform() < r.community_share) {
        spec.local_share = 0.2 + 0.75 * rng.uniform();
        const double cmax = std::min(r.community_max, static_cast<double>(s.k));
        spec.community = static_cast<std::int64_t>(std::llround(rng.log_uniform(std::min(r.community_min, cmax), cmax)));
      }
      break;
    }
    case OpKind::gemm: {
      if (rng.uniform() < 0.5) {  // GNN: node features through a layer's weight
        s.m = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.rows_min, r.rows_max)));
        s.k = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.feature_min, r.feature_max)));
        s.n = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.feature_min, r.feature_max)));
      } else {  // transformer: projections and FFN over seq_len tokens
        s.m = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.seq_min, r.seq_max)));
        const std::int64_t d = r.d_model[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(r.d_model.size())))];
        static constexpr std::int64_t kShapes[4][2] = {{1, 3}, {1, 1}, {1, 4}, {4, 1}};
        const auto& kn = kShapes[rng.below(4)];
        s.k = d * kn[0];
        s.n = d * kn[1];
      }
      break;
    }
    case OpKind::window_attention: {
      s.seq_len = round_to(rng.log_uniform(r.seq_min, r.seq_max), 16);
      const double wmax = std::min(r.window_max, static_cast<double>(s.seq_len));
      const double wmin = std::min(r.window_min, wmax);
      s.window = std::min(s.seq_len, round_to(rng.log_uniform(wmin, wmax), 2));
      s.heads = r.heads[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(r.heads.size())))];
      s.head_dim = r.head_dim;
      s.m = s.seq_len;
      s.k = s.heads * s.head_dim;
      s.n = s.heads * s.head_dim;
      break;
    }
    case OpKind::softmax:
    case OpKind::layer_norm: {
      s.m = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.rows_min, r.rows_max)));
      s.n = static_cast<std::int64_t>(std::llround(rng.log_uniform(r.feature_min, r.feature_max)));
      s.k = s.n;
      break;
    }
  }
  return s;
}

}  // namespace

double work_of(const OpShape& s) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  switch (s.kind) {
    case OpKind::spmm: return d(s.nnz) * d(s.n) + d(s.m) * d(s.n);
    case OpKind::gemm: return d(s.m) * d(s.k) * d(s.n);
    case OpKind::window_attention:
      return 2.0 * window_band_pairs(s.seq_len, s.window) * d(std::max<std::int64_t>(s.heads, 1)) *
             d(s.head_dim);
    case OpKind::softmax:
    case OpKind::layer_norm: return d(s.m) * d(s.n);
  }
  return 0.0;
}

double bytes_of(const OpShape& s) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  switch (s.kind) {
    case OpKind::spmm: return 8.0 * d(s.nnz) + 4.0 * d(s.m + 1) + 4.0 * (d(s.k) + d(s.m)) * d(s.n);
    case OpKind::gemm: return 4.0 * (d(s.m) * d(s.k) + d(s.k) * d(s.n) + d(s.m) * d(s.n));
    case OpKind::window_attention:
      return 16.0 * d(s.seq_len) * d(std::max<std::int64_t>(s.heads, 1)) * d(s.head_dim);
    case OpKind::softmax:
    case OpKind::layer_norm: return 8.0 * d(s.m) * d(s.n);
  }
  return 0.0;
}

std::vector<InputSpec> generate_specs(OpKind kind, const SyntheticRanges& ranges, int count,
                                      std::uint64_t seed) {
  Rng rng{seed * 0x2545F4914F6CDD1DULL + static_cast<std::uint64_t>(kind) + 1};
  std::vector<InputSpec> specs;
  specs.reserve(static_cast<std::size_t>(std::max(count, 0)));
  constexpr int kMaxTries = 10000;
  for (int i = 0; i < count; ++i) {
    bool found = false;
    for (int attempt = 0; attempt < kMaxTries && !found; ++attempt) {
      InputSpec spec;
      spec.shape = draw(kind, ranges, rng, spec);
      spec.seed = rng.next();
      if (work_of(spec.shape) > ranges.max_work) continue;
      if (ranges.max_device_bytes > 0 && bytes_of(spec.shape) > ranges.max_device_bytes) continue;
      spec.timing_only = bytes_of(spec.shape) > ranges.max_bytes;
      if (spec.timing_only && !ranges.allow_timing_only) continue;
      specs.push_back(spec);
      found = true;
    }
    if (!found) {
      throw Error("generate_specs: no " + std::string(kernels::to_string(kind)) +
                  " shape fits max_work / max_bytes; widen the caps or narrow the ranges");
    }
  }
  return specs;
}

std::vector<std::int64_t> other_feature_lengths(const InputSpec& spec, std::int64_t nnz, const SyntheticRanges& ranges,
                                                int count) {
  if (spec.shape.kind != OpKind::spmm) throw Error("other_feature_lengths: spec is not an SpMM");
  Rng rng{spec.seed ^ 0x5DEECE66DULL};
  std::vector<std::int64_t> widths;
  constexpr int kTriesEach = 20;
  for (int tries = 0; tries < kTriesEach * count && static_cast<int>(widths.size()) < count; ++tries) {
    OpShape s = spec.shape;
    s.nnz = nnz;
    s.n = draw_feature_length(ranges, rng);
    if (s.n == spec.shape.n || std::find(widths.begin(), widths.end(), s.n) != widths.end()) continue;
    if (work_of(s) > ranges.max_work || bytes_of(s) > ranges.max_bytes) continue;
    if (ranges.max_device_bytes > 0 && bytes_of(s) > ranges.max_device_bytes) continue;
    widths.push_back(s.n);
  }
  return widths;
}

kernels::CsrI32 materialise_csr(const InputSpec& spec) {
  const OpShape& s = spec.shape;
  if (s.kind != OpKind::spmm) throw Error("materialise_csr: spec is not an SpMM");
  if (s.m <= 0 || s.k <= 0 || s.nnz < 0) throw Error("materialise_csr: empty or negative shape");
  if (s.k > INT32_MAX || s.nnz > INT32_MAX) throw Error("materialise_csr: shape exceeds int32 CSR");
  Rng rng{spec.seed ^ 0xA5A5A5A5DEADBEEFULL};
  const auto rows = static_cast<std::size_t>(s.m);
  const double mean = static_cast<double>(s.nnz) / static_cast<double>(s.m);
  std::vector<double> want(rows);
  if (spec.degrees == DegreeDistribution::uniform) {
    std::mt19937_64 gen(spec.seed);
    std::poisson_distribution<std::int64_t> pois(mean);
    for (auto& w : want) w = static_cast<double>(pois(gen));
  } else {
    // Pareto tail with exponent alpha, then rescaled so the total matches nnz.
    const double inv = 1.0 / (spec.power_law_alpha - 1.0);
    double sum = 0;
    for (auto& w : want) {
      w = std::pow(1.0 - rng.uniform(), -inv);
      sum += w;
    }
    const double scale = static_cast<double>(s.nnz) / sum;
    for (auto& w : want) w *= scale;
  }
  kernels::CsrI32 a;
  a.rows = s.m;
  a.cols = s.k;
  a.indptr.resize(rows + 1);
  // Power law: a Chung-Lu graph. Columns are drawn with the same weights as row degrees, so the
  // hubs are hubs in both directions, as in the symmetrised graphs GNNs take (A + A^T): most
  // gathers then hit a few hot rows of X, which decides how cache-friendly a real graph's SpMM is.
  // Uniform graphs draw columns uniformly.
  // Walker/Vose alias table over the row weights: O(1) per drawn column.
  std::vector<double> alias_prob;
  std::vector<std::int32_t> alias_idx;
  if (spec.degrees == DegreeDistribution::power_law && s.k == s.m) {
    double total = 0;
    for (double w : want) total += w;
    alias_prob.resize(rows);
    alias_idx.resize(rows);
    std::vector<std::int32_t> small, large;
    for (std::size_t i = 0; i < rows; ++i) {
      alias_prob[i] = want[i] * static_cast<double>(rows) / total;
      (alias_prob[i] < 1.0 ? small : large).push_back(static_cast<std::int32_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      const std::int32_t lo = small.back(), hi = large.back();
      small.pop_back();
      alias_idx[static_cast<std::size_t>(lo)] = hi;
      alias_prob[static_cast<std::size_t>(hi)] -= 1.0 - alias_prob[static_cast<std::size_t>(lo)];
      if (alias_prob[static_cast<std::size_t>(hi)] < 1.0) {
        large.pop_back();
        small.push_back(hi);
      }
    }
    for (auto i : small) alias_prob[static_cast<std::size_t>(i)] = 1.0;  // rounding leftovers
    for (auto i : large) alias_prob[static_cast<std::size_t>(i)] = 1.0;
  }
  const bool local = spec.local_share > 0 && spec.community > 0;
  const double row_to_col = static_cast<double>(s.k) / static_cast<double>(s.m);
  // Rows are built in parallel blocks, each row from its own random stream (seeded by the spec and
  // the row), so the graph is the same whatever the thread count; blocks are then joined in order.
  // Building the graph, not timing it, took most of a GPU profile.
  constexpr std::size_t kBlocks = 256;
  const std::size_t block_rows = (rows + kBlocks - 1) / kBlocks;
  struct Block {
    std::vector<std::int32_t> indices;
    std::vector<float> values;
    std::vector<std::int32_t> lengths;
  };
  std::vector<Block> blocks((rows + block_rows - 1) / block_rows);
  tbb::parallel_for(std::size_t{0}, blocks.size(), [&](std::size_t b) {
    Block& out = blocks[b];
    std::vector<std::int32_t> row;
    const std::size_t r0 = b * block_rows, r1 = std::min(rows, r0 + block_rows);
    for (std::size_t i = r0; i < r1; ++i) {
      Rng rr{spec.seed ^ 0xA5A5A5A5DEADBEEFULL ^ (0xD1B54A32D192ED03ULL * (i + 1))};
      auto draw_col = [&]() -> std::int32_t {
        if (local && rr.uniform() < spec.local_share) {
          // Uniform within the row's community, wrapped at the ends of the id range.
          const auto centre = static_cast<std::int64_t>(static_cast<double>(i) * row_to_col);
          const std::int64_t c = centre - spec.community / 2 + rr.below(spec.community);
          return static_cast<std::int32_t>(((c % s.k) + s.k) % s.k);
        }
        if (alias_prob.empty()) return static_cast<std::int32_t>(rr.below(s.k));
        const auto j = static_cast<std::size_t>(rr.below(s.k));
        return rr.uniform() < alias_prob[j] ? static_cast<std::int32_t>(j) : alias_idx[j];
      };
      // Stochastic rounding keeps the expected total at nnz for fractional Pareto degrees.
      auto deg = static_cast<std::int64_t>(want[i]);
      if (rr.uniform() < want[i] - static_cast<double>(deg)) ++deg;
      deg = std::min(deg, s.k);
      const auto want_len = static_cast<std::size_t>(deg);
      row.clear();
      // Duplicates merge; hub columns repeat often, so top the row up a few rounds to keep nnz near
      // the spec (a row nearly as long as k may stay a little short).
      for (int round = 0; round < 8 && row.size() < want_len; ++round) {
        const std::size_t have = row.size();
        row.resize(want_len);
        for (std::size_t j = have; j < want_len; ++j) row[j] = draw_col();
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
      }
      out.indices.insert(out.indices.end(), row.begin(), row.end());
      for (std::size_t j = 0; j < row.size(); ++j) out.values.push_back(static_cast<float>(2.0 * rr.uniform() - 1.0));
      out.lengths.push_back(static_cast<std::int32_t>(row.size()));
    }
  });
  std::size_t total = 0;
  for (const Block& b : blocks) total += b.indices.size();
  a.indices.reserve(total);
  a.values.reserve(total);
  std::size_t r = 0;
  for (Block& b : blocks) {
    for (std::int32_t len : b.lengths) {
      a.indptr[r + 1] = a.indptr[r] + len;
      ++r;
    }
    a.indices.insert(a.indices.end(), b.indices.begin(), b.indices.end());
    a.values.insert(a.values.end(), b.values.begin(), b.values.end());
    std::vector<std::int32_t>().swap(b.indices);  // release as we go: big graphs hold ~2x briefly
    std::vector<float>().swap(b.values);
  }
  return a;
}

double estimated_skew(const InputSpec& spec) {
  const OpShape& s = spec.shape;
  if (s.m <= 0 || s.nnz <= 0) return 0.0;
  const double rows = static_cast<double>(s.m);
  const double mean_row = static_cast<double>(s.nnz) / rows;
  double max_row;
  if (spec.degrees == DegreeDistribution::uniform) {
    // Poisson maximum over many rows: mean + ~ sqrt(2 mean ln rows).
    max_row = mean_row + std::sqrt(2.0 * mean_row * std::log(rows)) + 1.0;
  } else {
    // Pareto(shape a = alpha - 1): the largest of `rows` draws ~ rows^(1/a), mean a / (a - 1).
    const double a = spec.power_law_alpha - 1.0;
    const double pareto_mean = a > 1.0 ? a / (a - 1.0) : 10.0;
    max_row = std::pow(rows, 1.0 / a) * mean_row / pareto_mean;
  }
  max_row = std::min(max_row, static_cast<double>(s.k));
  return std::max(1.0, max_row / mean_row);
}

}  // namespace dype::perf
