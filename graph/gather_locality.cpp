#include "graph/gather_locality.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace dype::kernels {
namespace {

// Columns are sampled by hash only beyond this many: below it every column is tracked (exact).
constexpr double kSampledColumns = 262144;
constexpr int kSubBuckets = 8;  // per octave: the footprint is known exactly at each boundary
constexpr int kBuckets = 64 * kSubBuckets;

// Bucket of a time t >= 1: octave j = floor(log2 t), then eighths of the octave. Bucket b's lower
// boundary is lower(b) = 2^j (1 + s / 8); every t in bucket b is >= lower(b).
int bucket_of(std::uint64_t t) {
  const int j = std::bit_width(t) - 1;
  const std::uint64_t s = j >= 3 ? (t >> (j - 3)) & 7u : ((t - (std::uint64_t{1} << j)) << (3 - j)) & 7u;
  return j * kSubBuckets + static_cast<int>(s);
}
double lower(int b) {
  return std::ldexp(1.0 + (b % kSubBuckets) / static_cast<double>(kSubBuckets), b / kSubBuckets);
}

// Times (reuse times, first accesses, reverse last accesses) by bucket: count and sum, enough for
// the footprint at every bucket boundary exactly.
struct TimeHistogram {
  std::vector<double> count = std::vector<double>(kBuckets, 0.0);
  std::vector<double> sum = std::vector<double>(kBuckets, 0.0);
  void add(std::uint64_t t) {
    const auto b = static_cast<std::size_t>(bucket_of(t));
    count[b] += 1;
    sum[b] += static_cast<double>(t);
  }
};

}  // namespace

double GatherLocality::miss_at(double cache_rows) const {
  if (cache_rows <= rows(0)) {
    // Between one row (always a miss unless the same row repeats) and the first level.
    if (cache_rows <= 1.0) return 1.0;
    const double t = std::log2(cache_rows) / std::log2(rows(0));
    return (1.0 - t) + t * miss[0];
  }
  for (int i = 0; i + 1 < kLevels; ++i) {
    if (cache_rows <= rows(i + 1)) {
      const double t = std::log2(cache_rows / rows(i)) / 2.0;
      return (1.0 - t) * miss[static_cast<std::size_t>(i)] + t * miss[static_cast<std::size_t>(i) + 1];
    }
  }
  return miss[kLevels - 1];
}

GatherLocality GatherLocality::uniform(std::int64_t k, std::int64_t nnz) {
  GatherLocality g;
  const double kk = std::max<double>(1.0, static_cast<double>(k));
  const double n = static_cast<double>(std::max<std::int64_t>(nnz, 0));
  // Distinct columns touched by n uniform draws, and their share of the draws.
  const double touched = kk * -std::expm1(-n / kk);
  const double compulsory = n > 0 ? std::min(1.0, touched / n) : 0.0;
  for (int i = 0; i < kLevels; ++i)
    g.miss[static_cast<std::size_t>(i)] =
        static_cast<float>(std::max(compulsory, std::max(0.0, 1.0 - rows(i) / kk)));
  return g;
}

GatherLocality gather_locality(std::span<const std::int32_t> indices, std::int64_t cols) {
  GatherLocality g;
  const std::uint64_t n = indices.size();
  if (n >= (std::uint64_t{1} << 32)) return GatherLocality::uniform(cols, static_cast<std::int64_t>(n));  // beyond int32 CSR
  if (n == 0 || cols <= 0) {
    g.miss.fill(0.0f);
    return g;
  }
  const double rate = std::min(1.0, kSampledColumns / static_cast<double>(cols));
  const auto threshold = static_cast<std::uint64_t>(rate * 4294967296.0);
  TimeHistogram reuse, first, last;
  double sampled = 0;  // gathers of sampled columns
  // Last gather time per column (0: not yet), indexed directly: int32 CSR keeps times below 2^32.
  std::vector<std::uint32_t> seen(static_cast<std::size_t>(cols), 0);
  double m = 0;  // distinct sampled columns
  for (std::uint64_t t = 1; t <= n; ++t) {
    const auto c = static_cast<std::uint32_t>(indices[t - 1]);
    // Multiplicative hash of the column id: a column is in the sample or not, for all its gathers.
    if (rate < 1.0 && ((static_cast<std::uint64_t>(c) * 0x9E3779B97F4A7C15ull) >> 32) >= threshold) continue;
    sampled += 1;
    std::uint32_t& prev = seen[c];
    if (prev == 0) {
      first.add(t);
      m += 1;
    } else {
      reuse.add(t - prev);
    }
    prev = static_cast<std::uint32_t>(t);
  }
  for (std::uint32_t at : seen)
    if (at != 0) last.add(n - at + 1);
  if (m == 0) return GatherLocality::uniform(cols, static_cast<std::int64_t>(n));  // sample missed every column
  const double nd = static_cast<double>(n);
  // HOTL: the footprint fp(w) = m - sum_{t > w} (t - w) [reuse + first + last] / (n - w + 1), exact
  // at each bucket's lower boundary w (suffix sums), scaled back by the sampling rate; the miss
  // ratio of a cache of fp(w) rows is the share of gathers whose reuse time exceeds w (first
  // touches never reuse), taken over the sampled gathers themselves.
  std::vector<double> fp, tail;
  double cnt = 0, sum = 0, reuse_above = 0;
  std::vector<double> excess(kBuckets), above(kBuckets);
  for (int b = kBuckets - 1; b >= 0; --b) {
    const auto u = static_cast<std::size_t>(b);
    cnt += reuse.count[u] + first.count[u] + last.count[u];
    sum += reuse.sum[u] + first.sum[u] + last.sum[u];
    reuse_above += reuse.count[u];
    excess[u] = sum - lower(b) * cnt;
    above[u] = reuse_above;
  }
  for (int b = 0; b < kBuckets && lower(b) < nd; ++b) {
    const auto u = static_cast<std::size_t>(b);
    const double w = lower(b);
    // Reuse times >= w: bucket b onwards; those equal to w hit, which matters only for tiny w.
    fp.push_back(std::max(0.0, m - excess[u] / (nd - w + 1.0)) / rate);
    tail.push_back((above[u] + m) / sampled);
  }
  const double compulsory = std::min(1.0, m / sampled);
  for (int i = 0; i < GatherLocality::kLevels; ++i) {
    const double cache = GatherLocality::rows(i);
    double miss = compulsory;  // every touched row fits: only first touches miss
    for (std::size_t j = 1; j < fp.size(); ++j) {
      if (fp[j] >= cache) {
        // Interpolate between the boundaries around fp = cache.
        const double f = fp[j] > fp[j - 1] ? (cache - fp[j - 1]) / (fp[j] - fp[j - 1]) : 1.0;
        miss = tail[j - 1] + std::clamp(f, 0.0, 1.0) * (tail[j] - tail[j - 1]);
        break;
      }
    }
    g.miss[static_cast<std::size_t>(i)] = static_cast<float>(std::clamp(std::max(miss, compulsory), 0.0, 1.0));
  }
  return g;
}

}  // namespace dype::kernels
