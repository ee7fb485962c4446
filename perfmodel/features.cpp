#include "perfmodel/features.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace dype::perf {
namespace {

double d(std::int64_t v) { return static_cast<double>(v); }

// Fraction of a working set of `bytes` that does not fit in `cache` bytes.
double beyond(double bytes, double cache) { return bytes > cache ? 1.0 - cache / bytes : 0.0; }

// SpMM on GPU-like devices, paper Eq. 7, plus an intercept for launch overhead.
constexpr std::string_view kSpmmGpuNames[] = {"N", "nnz", "GFLOP", "arm", "1"};
// arm enters with either sign: higher intensity can make a kernel faster per FLOP.
constexpr bool kSpmmGpuNonNeg[] = {true, true, true, false, true};
void spmm_gpu(const OpShape& s, const FeatureParams&, double* f) {
  const double gflop = (2.0 * d(s.nnz) * d(s.n) - d(s.m) * d(s.n)) * 1e-9;
  const double traffic = 8.0 * (d(s.nnz) + d(s.m) * d(s.n));
  f[0] = d(s.n);
  f[1] = d(s.nnz);
  f[2] = gflop;
  f[3] = traffic > 0 ? gflop * 1e9 / traffic : 0.0;
  f[4] = 1.0;
}

// SpMM on GPU-like devices, v2: Eq. 7's terms plus what makes a CSR SpMM on a GPU
// gather-bound: rows of X gathered per nonzero that miss the device cache (the fraction of X that
// does not fit), the output write, a per-row cost (short rows leave most of a wavefront idle), and
// all traffic scaled by log2 of the degree skew (a few long rows serialise on one compute unit).
// Eq. 7 alone misses by ~55% on the emulated MI210 across the generated ranges; this set by ~3%.
constexpr std::string_view kSpmmGpuV2Names[] = {"N",   "nnz",        "GFLOP",          "arm", "1",
                                                "M*N", "gather_miss", "bytes*log2skew", "M"};
constexpr bool kSpmmGpuV2NonNeg[] = {true, true, true, false, true, true, true, true, true};
void spmm_gpu_v2(const OpShape& s, const FeatureParams& p, double* f) {
  spmm_gpu(s, p, f);
  const double x_bytes = 4.0 * d(s.k) * d(s.n);
  const double hit = x_bytes > 0 ? std::min(1.0, p.llc_bytes / x_bytes) : 1.0;
  const double gather_miss = d(s.n) * d(s.nnz) * (1.0 - hit);
  const double bytes = 8.0 * d(s.nnz) + 4.0 * d(s.m) + 4.0 * d(s.m) * d(s.n) + 4.0 * gather_miss + x_bytes * hit;
  f[5] = d(s.m) * d(s.n);
  f[6] = gather_miss;
  f[7] = bytes * std::log2(std::max(1.0, s.degree_skew));
  f[8] = d(s.m);
}

// SpMM on GPU-like devices, v3 (the GPU default but on CUDA): v2 plus the row passes of a wavefront-per-row CSR kernel
// (rocSPARSE/cuSPARSE style): a 64-lane wavefront covers at most 64 output columns of a row per
// pass, so a row costs ceil(N / 64) passes whatever its length, and N = 20 pays a whole pass. v2's
// single per-row term cannot tell N = 64 from N = 65.
constexpr std::string_view kSpmmGpuV3Names[] = {"N",   "nnz",         "GFLOP",          "arm", "1",
                                                "M*N", "gather_miss", "bytes*log2skew", "M",   "M*row_passes"};
constexpr bool kSpmmGpuV3NonNeg[] = {true, true, true, false, true, true, true, true, true, true};
constexpr double kGpuWavefrontLanes = 64;  // AMD CDNA wave64 (NVIDIA warps are 32: a finer step)
void spmm_gpu_v3(const OpShape& s, const FeatureParams& p, double* f) {
  spmm_gpu_v2(s, p, f);
  f[9] = d(s.m) * std::max(1.0, std::ceil(d(s.n) / kGpuWavefrontLanes));
}

// SpMM on GPU-like devices, v4 (the default for CUDA devices): cuSPARSE's CSR SpMM (ALG2, row-major
// X and Y) on NVIDIA GPUs, chosen on an H200's 598 synthetic samples (perfmodel/README.md) by 5-fold
// cross-validation that holds out whole graphs: 7.6% against v3's 11.2% on the same folds (held-out
// 8.8% against 11.4% on the store's own split). v3 over-predicted three real graphs by 40-55% at
// N >= 128, for two reasons the samples show: (1) the real graphs were timed at N = 16..512, all
// multiples of 4, where the kernel moves rows of X and Y in float4s (a warp covers 128 columns a
// pass), while three quarters of the synthetic widths were not and take one float per lane (32
// columns a pass): against the v3 fit, synthetic points with N % 4 == 0 and N >= 128 ran 13% below
// the others (median measured / predicted, 76 and 197 points). (2) v3 priced cache-missing gathers
// as if columns were random; real graphs reuse rows of X (their miss-ratio curve, OpShape::locality).
// Terms (all non-negative):
//   1                the launch: cuSPARSE's host call and the kernel's start (the timing events
//                    bracket the host call, so this is the floor of a small SpMM: ~20 us here).
//   nnz*passes128    per nonzero, one gather per 128-column pass of float4 lanes: N = 16 costs a
//                    nonzero what N = 128 does (the small-N floor per nonzero), and past 128
//                    columns the gathers stream through L2 in proportion to N.
//   M*passes         per row and pass of the width the kernel gets: 128 columns when N % 4 == 0,
//                    32 otherwise (scalar lanes). A pass is a warp's walk of the row plus the store
//                    of its slice of Y, so unaligned widths pay it four times as often.
//   nnz*N*missL2     gathered floats that miss L2 and come from HBM: the graph's own miss ratio at
//                    the L2's capacity in rows of X (random columns when the shape has no indices).
//   nnz*missL2       a DRAM round trip per gathered row that misses, whatever its width.
//   M*N*Ybeyond      Y's write-back when Y is larger than L2 (the share of Y beyond it).
// "L2" is a quarter of the device's last-level cache (params.llc_bytes): on the H200 (60 MiB) the
// cross-validated error was lowest for 10-15 MiB of the 6-60 MiB tried (7.4-7.7% against 10.3% at
// the full 60). The two L2 halves each keep their own copy of lines that SMs on both sides read,
// and Y's writes and the CSR streams pass through the same cache, so X's gathers see a fraction.
// Tried and left out (under 0.25 points of cross-validated error each): per-nonzero cost by the
// pass width (unaligned gathers issue four loads per float4), v3's skew-weighted bytes, a plain
// nnz*N stream, gathers missing a per-SM L1 of 128 KiB by the graph's curve.
constexpr std::string_view kSpmmGpuV4Names[] = {"1",           "nnz*passes128", "M*passes",
                                                "nnz*N*missL2", "nnz*missL2",    "M*N*Ybeyond"};
constexpr bool kSpmmGpuV4NonNeg[] = {true, true, true, true, true, true};
constexpr double kGpuWarpLanes = 32;           // NVIDIA warp; a lane moves 1 float, or 4 (float4)
constexpr double kGpuVectorFloats = 4;         // float4 loads and stores need N % 4 == 0
constexpr double kGpuL2ShareForGathers = 0.25; // of params.llc_bytes, see above
void spmm_gpu_v4(const OpShape& s, const FeatureParams& p, double* f) {
  const double n = d(s.n);
  const bool vector = s.n % static_cast<std::int64_t>(kGpuVectorFloats) == 0;
  const double wide_pass = kGpuWarpLanes * kGpuVectorFloats;
  const double passes128 = std::max(1.0, std::ceil(n / wide_pass));
  const double passes = std::max(1.0, std::ceil(n / (vector ? wide_pass : kGpuWarpLanes)));
  const double l2 = kGpuL2ShareForGathers * p.llc_bytes;
  const double x_bytes = 4.0 * d(s.k) * n;
  const double y_bytes = 4.0 * d(s.m) * n;
  double miss = 0.0;
  if (x_bytes > l2 && n > 0) {
    const double rows = l2 / (4.0 * n);
    miss = s.locality.known() ? s.locality.miss_at(rows)
                              : kernels::GatherLocality::uniform(s.k, s.nnz).miss_at(rows);
  }
  f[0] = 1.0;
  f[1] = d(s.nnz) * passes128;
  f[2] = d(s.m) * passes;
  f[3] = d(s.nnz) * n * miss;
  f[4] = d(s.nnz) * miss;
  f[5] = d(s.m) * n * beyond(y_bytes, l2);
}

// SpMM on FPGA: the Sextans estimate with a fitted scale (and a fixed launch cost).
constexpr std::string_view kSextansNames[] = {"sextans_s", "1"};
constexpr bool kSextansNonNeg[] = {true, true};
void spmm_fpga(const OpShape& s, const FeatureParams& p, double* f) {
  f[0] = sextans_estimate_s(s, p);
  f[1] = 1.0;
}

// SpMM on CPU (chosen by measurement, see perfmodel/README.md): the multiply-add stream over nnz
// rows of X, priced by where X's rows come from: each cache level X overflows adds a cost per
// gathered vector in proportion to the fraction of X that does not fit there (random row gathers).
// Plus the output write, per-nonzero index work, per-row overhead and a fork/join constant. N is
// padded to the SIMD width because a row of X is processed in whole vectors.
constexpr std::string_view kSpmmCpuNames[] = {"nnz*Nv",        "nnz*Nv*missL1", "nnz*Nv*missL2",
                                              "nnz*Nv*missLLC", "M*N",          "nnz",
                                              "M",             "1"};
constexpr bool kSpmmCpuNonNeg[] = {true, true, true, true, true, true, true, true};
void spmm_cpu(const OpShape& s, const FeatureParams& p, double* f) {
  const double nv = std::ceil(d(s.n) / p.simd_floats) * p.simd_floats;
  const double x_bytes = 4.0 * d(s.k) * d(s.n);
  auto miss = [&](double cache) { return x_bytes > cache ? 1.0 - cache / x_bytes : 0.0; };
  const double stream = d(s.nnz) * nv;
  f[0] = stream;
  f[1] = stream * miss(p.l1_bytes);
  f[2] = stream * miss(p.l2_bytes);
  f[3] = stream * miss(p.llc_bytes);
  f[4] = d(s.m) * d(s.n);
  f[5] = d(s.nnz);
  f[6] = d(s.m);
  f[7] = 1.0;
}

// Cache steps above L2 at which a CPU's effective last level is probed: L2 x 4^i (2, 8, 32,
// 128 MiB for a 2 MiB L2). The LLC a process really gets is rarely the size the CPU reports: a VM
// sees the whole socket's L3 (480 MiB here) shared with every other tenant, so a single
// "beyond the LLC" term priced at the reported size never switched on. A ladder of hinges lets the
// fit place the bend where the measurements put it.
constexpr int kCacheSteps = 4;
double cache_step(const FeatureParams& p, int i) { return p.l2_bytes * std::pow(4.0, i); }

// SpMM on CPU, v3 (default): v2's stream priced by where X's rows come from, with the LLC term
// replaced by the ladder above; per-gather latency beyond L2 and 16 x L2 (a row of X narrower than
// a few lines is latency-bound, not bandwidth-bound); index, per-row and output work counted per
// 128-column block, as the row kernel walks a row's nonzeros once per block; writing Y beyond L2
// and 16 x L2 (graphs of about one nonzero per row are write-bound). The gathers that miss
// a cache level are scaled by a hub factor 1 / (1 + 0.1 log2 skew): in a power-law graph most
// nonzeros point at a few hub rows of X, which stay cached whatever X's size (profiled on Chung-Lu
// graphs, hubs in both directions, see synthetic.h). The factor's 0.1 ties 0.05 on the synthetic
// points' 5-fold MAPE (14.3% vs 13.9%, 0: 14.6%) and predicts a real graph better (perfmodel/README.md).
// The Y terms took held-out MAPE from 14.5% to 12.6% on the same 725 points.
constexpr std::string_view kSpmmCpuV3Names[] = {
    "nnz*Nv",           "nnz*Nv*missL1",     "nnz*Nv*missL2*hub", "nnz*Nv*miss4L2*hub",
    "nnz*Nv*miss16L2*hub", "nnz*Nv*miss64L2*hub", "nnz*blk*missL2*hub", "nnz*blk*miss16L2*hub",
    "M*N",              "nnz*blk",           "M*blk",             "1",
    "M*N*missL2(Y)",    "M*N*miss16L2(Y)"};
constexpr bool kSpmmCpuV3NonNeg[] = {true, true, true, true, true, true, true,
                                     true, true, true, true, true, true, true};
constexpr double kSpmmBlockFloats = 128;  // the AVX-512 row kernel's accumulator block
constexpr double kHubWeight = 0.1;
void spmm_cpu_v3(const OpShape& s, const FeatureParams& p, double* f) {
  const double nv = std::ceil(d(s.n) / p.simd_floats) * p.simd_floats;
  const double blk = std::max(1.0, std::ceil(d(s.n) / kSpmmBlockFloats));
  const double x_bytes = 4.0 * d(s.k) * d(s.n);
  const double stream = d(s.nnz) * nv;
  const double hub = 1.0 / (1.0 + kHubWeight * std::log2(std::max(1.0, s.degree_skew)));
  f[0] = stream;
  f[1] = stream * beyond(x_bytes, p.l1_bytes);
  for (int i = 0; i < kCacheSteps; ++i) f[2 + i] = stream * hub * beyond(x_bytes, cache_step(p, i));
  f[6] = d(s.nnz) * blk * hub * beyond(x_bytes, cache_step(p, 0));
  f[7] = d(s.nnz) * blk * hub * beyond(x_bytes, cache_step(p, 2));
  f[8] = d(s.m) * d(s.n);
  f[9] = d(s.nnz) * blk;
  f[10] = d(s.m) * blk;
  f[11] = 1.0;
  const double y_bytes = 4.0 * d(s.m) * d(s.n);
  f[12] = d(s.m) * d(s.n) * beyond(y_bytes, cache_step(p, 0));
  f[13] = d(s.m) * d(s.n) * beyond(y_bytes, cache_step(p, 2));
}

// SpMM on CPU, v4 (default): v3 with the hub factor replaced by what the graph's own gathers do.
// Each cache level's random-id miss fraction (X beyond the level) is scaled by how much less the
// graph misses there than a graph of the same shape with random columns: the ratio of its
// miss-ratio curve (OpShape::locality, from the column indices) to the uniform curve at that
// level's capacity in rows of X. Real graphs number related nodes together and reuse hub rows, so
// the same shape misses less; synthetic profiles include such graphs (community structure,
// synthetic.h). Measured against v3 on the same 1000 samples and three real graphs from Debian
// packages (perfmodel/README.md). Using the curve's miss ratio alone as the per-level price
// (without the random-id fraction) fitted worse (held-out 15.1%) and under-predicted a large
// dense real graph by up to 47%: hardware prefetching keeps sequential local gathers cheap only
// up to what the random-id fraction already prices. Shape-only inputs: ratio 1 (v3 without hubs).
constexpr std::string_view kSpmmCpuV4Names[] = {
    "nnz*Nv",             "nnz*Nv*missL1",      "nnz*Nv*missL2*loc",  "nnz*Nv*miss4L2*loc",
    "nnz*Nv*miss16L2*loc", "nnz*Nv*miss64L2*loc", "nnz*blk*missL2*loc", "nnz*blk*miss16L2*loc",
    "M*N",                "nnz*blk",            "M*blk",              "1",
    "M*N*missL2(Y)",      "M*N*miss16L2(Y)"};
void spmm_cpu_v4(const OpShape& s, const FeatureParams& p, double* f) {
  spmm_cpu_v3(s, p, f);
  const double nv = std::ceil(d(s.n) / p.simd_floats) * p.simd_floats;
  const double blk = std::max(1.0, std::ceil(d(s.n) / kSpmmBlockFloats));
  const kernels::GatherLocality rnd = kernels::GatherLocality::uniform(s.k, s.nnz);
  const kernels::GatherLocality& loc = s.locality.known() ? s.locality : rnd;
  const double x_bytes = 4.0 * d(s.k) * d(s.n);
  auto rel = [&](double cache) {
    const double rows = cache / (4.0 * nv);
    const double r = rnd.miss_at(rows);
    return r > 0 ? std::min(1.0, loc.miss_at(rows) / r) : 1.0;
  };
  const double stream = d(s.nnz) * nv;
  for (int i = 0; i < kCacheSteps; ++i) f[2 + i] = stream * rel(cache_step(p, i)) * beyond(x_bytes, cache_step(p, i));
  f[6] = d(s.nnz) * blk * rel(cache_step(p, 0)) * beyond(x_bytes, cache_step(p, 0));
  f[7] = d(s.nnz) * blk * rel(cache_step(p, 2)) * beyond(x_bytes, cache_step(p, 2));
}

// GEMM, paper Eq. 8 (all device classes).
constexpr std::string_view kGemmNames[] = {"K", "N", "MN", "MK", "KN", "MKN", "1"};
constexpr bool kGemmNonNeg[] = {true, true, true, true, true, true, true};
void gemm_eq8(const OpShape& s, const FeatureParams&, double* f) {
  f[0] = d(s.k);
  f[1] = d(s.n);
  f[2] = d(s.m) * d(s.n);
  f[3] = d(s.m) * d(s.k);
  f[4] = d(s.k) * d(s.n);
  f[5] = d(s.m) * d(s.k) * d(s.n);
  f[6] = 1.0;
}

// GEMM on CPU (chosen by measurement, see perfmodel/README.md): Eq. 8's products without the bare
// K and N terms (never significant on the CPU), plus the output write priced by where Y lands
// (the fraction of Y beyond L2 and beyond the LLC: a large Y with small K is write-bound), and
// oneDNN's tail kernels when N is not a multiple of the SIMD width (masked loads and stores on
// every row: measured up to 2x slower per output). Held-out MAPE 15.5% -> 13.1% on the same samples.
constexpr std::string_view kGemmCpuNames[] = {"MN",          "MK",           "KN",       "MKN", "1",
                                              "MN*missL2", "MN*missLLC", "MKN*Ntail", "MN*Ntail"};
constexpr bool kGemmCpuNonNeg[] = {true, true, true, true, true, true, true, true, true};
void gemm_cpu(const OpShape& s, const FeatureParams& p, double* f) {
  const double mn = d(s.m) * d(s.n), mkn = mn * d(s.k);
  const double y_bytes = 4.0 * mn;
  auto miss = [&](double cache) { return y_bytes > cache ? 1.0 - cache / y_bytes : 0.0; };
  const double tail = std::fmod(d(s.n), p.simd_floats) != 0.0 ? 1.0 : 0.0;
  f[0] = mn;
  f[1] = d(s.m) * d(s.k);
  f[2] = d(s.k) * d(s.n);
  f[3] = mkn;
  f[4] = 1.0;
  f[5] = mn * miss(p.l2_bytes);
  f[6] = mn * miss(p.llc_bytes);
  f[7] = mkn * tail;
  f[8] = mn * tail;
}

// GEMM on CPU, v3 (default): v2's terms with the output-beyond-the-LLC term replaced by the cache
// ladder over the whole working set (X + Y, as oneDNN streams both), X's reads beyond L2 and
// 16 x L2 (small-K shapes read X once and are bandwidth-bound), and the per-call costs of the row
// blocks the kernel hands oneDNN (each call sets up and packs the k x n weights: "blocks",
// "blocks*KN"; kernels/cpu/gemm.cpp's split, for the profiled thread count). Held-out MAPE 11.6% ->
// 9.0% on the same 400 samples (5-fold: 9.6% -> 6.9%).
constexpr std::string_view kGemmCpuV3Names[] = {
    "MN",          "MK",          "KN",          "MKN",          "1",       "MKN*Ntail", "MN*Ntail",
    "MN*missL2",   "MN*miss4L2",  "MN*miss16L2", "MN*miss64L2",  "MK*missL2", "MK*miss16L2",
    "blocks",      "blocks*KN"};
constexpr bool kGemmCpuV3NonNeg[] = {true, true, true, true, true, true, true, true,
                                     true, true, true, true, true, true, true};
// kernels/cpu/gemm.cpp's row blocks: ~8 per thread, 256..16384 rows each, one call when a single
// block (or thread) remains.
double gemm_cpu_blocks(double m, double threads) {
  const double t = std::max(1.0, threads);
  const double rows = std::clamp(std::ceil(m / (t * 8.0)), 256.0, 16384.0);
  const double blocks = std::ceil(m / rows);
  return t <= 1.0 ? 1.0 : std::max(1.0, blocks);
}
void gemm_cpu_v3(const OpShape& s, const FeatureParams& p, double* f) {
  const double mn = d(s.m) * d(s.n), mk = d(s.m) * d(s.k), mkn = mn * d(s.k);
  const double bytes = 4.0 * (mn + mk);
  const double tail = std::fmod(d(s.n), p.simd_floats) != 0.0 ? 1.0 : 0.0;
  const double blocks = gemm_cpu_blocks(d(s.m), p.threads);
  f[0] = mn;
  f[1] = mk;
  f[2] = d(s.k) * d(s.n);
  f[3] = mkn;
  f[4] = 1.0;
  f[5] = mkn * tail;
  f[6] = mn * tail;
  for (int i = 0; i < kCacheSteps; ++i) f[7 + i] = mn * beyond(bytes, cache_step(p, i));
  f[11] = mk * beyond(bytes, cache_step(p, 0));
  f[12] = mk * beyond(bytes, cache_step(p, 2));
  f[13] = blocks;
  f[14] = blocks * d(s.k) * d(s.n);
}

// Window attention on FPGA: the SWAT estimate (Eq. 9) for one attention layer (SWAT streams all
// heads through one pipeline, so heads do not enter, as in the paper) with a fitted scale.
constexpr std::string_view kSwatNames[] = {"swat_s", "1"};
constexpr bool kSwatNonNeg[] = {true, true};
void wa_fpga(const OpShape& s, const FeatureParams& p, double* f) {
  f[0] = swat_estimate_s(s, p);
  f[1] = 1.0;
}

// Window attention on GPU: frameworks compute dense masked attention, so cost follows seq_len^2.
constexpr std::string_view kWaGpuNames[] = {"L^2*D", "L^2*H", "L*D", "1"};
constexpr bool kWaGpuNonNeg[] = {true, true, true, true};
void wa_gpu(const OpShape& s, const FeatureParams&, double* f) {
  const double l = d(s.seq_len);
  const double dm = d(std::max<std::int64_t>(s.heads, 1)) * d(s.head_dim);
  f[0] = l * l * dm;
  f[1] = l * l * d(std::max<std::int64_t>(s.heads, 1));
  f[2] = l * dm;
  f[3] = 1.0;
}

// Window attention on CPU: band-only work (SDDMM + SpMM over the band), band softmax, Q/K/V/out
// streaming, fork/join.
constexpr std::string_view kWaCpuNames[] = {"band*D", "band*H", "L*D", "1"};
constexpr bool kWaCpuNonNeg[] = {true, true, true, true};
void wa_cpu(const OpShape& s, const FeatureParams&, double* f) {
  const double band = window_band_pairs(s.seq_len, s.window);
  const double h = d(std::max<std::int64_t>(s.heads, 1));
  const double dm = h * d(s.head_dim);
  f[0] = band * dm;
  f[1] = band * h;
  f[2] = d(s.seq_len) * dm;
  f[3] = 1.0;
}

// Window attention on CPU, v2: heads interleave in each row of Q/K/V (row stride H x D), so a head's
// band gathers strided rows: cost per band element grows with log2(H) (prefetch and TLB reach), and
// the band's K/V rows stop fitting in L2 for wide windows and many heads. Held-out MAPE 14.7% -> 9.9%
// on the same samples.
constexpr std::string_view kWaCpuV2Names[] = {"band*D", "band*H", "L*D", "1", "band*D*log2H", "band*D*missL2"};
constexpr bool kWaCpuV2NonNeg[] = {true, true, true, true, true, true};
void wa_cpu_v2(const OpShape& s, const FeatureParams& p, double* f) {
  wa_cpu(s, p, f);
  const double h = d(std::max<std::int64_t>(s.heads, 1));
  const double half = d(std::min<std::int64_t>(s.window / 2, std::max<std::int64_t>(s.seq_len - 1, 0)));
  const double kv_bytes = 2.0 * (2.0 * half + 1.0) * h * d(s.head_dim) * 4.0;
  const double miss = kv_bytes > p.l2_bytes ? 1.0 - p.l2_bytes / kv_bytes : 0.0;
  f[4] = f[0] * std::log2(h);
  f[5] = f[0] * miss;
}

// Row-wise softmax / layer norm on any device: streaming over m x n.
constexpr std::string_view kRowNames[] = {"M*N", "M", "1"};
constexpr bool kRowNonNeg[] = {true, true, true};
void rowwise(const OpShape& s, const FeatureParams&, double* f) {
  f[0] = d(s.m) * d(s.n);
  f[1] = d(s.m);
  f[2] = 1.0;
}

#define DYPE_FS(id, kind, cls, names, nonneg, size_idx, fn) \
  FeatureSet { id, kind, cls, names, nonneg, size_idx, fn }

const FeatureSet kSets[] = {
    // v3: the GPU default; CUDA devices take v4 (kBackendDefaults).
    DYPE_FS("spmm.gpu.v3", OpKind::spmm, DeviceClass::gpu, kSpmmGpuV3Names, kSpmmGpuV3NonNeg, 2,
            spmm_gpu_v3),
    DYPE_FS("spmm.gpu.v4", OpKind::spmm, DeviceClass::gpu, kSpmmGpuV4Names, kSpmmGpuV4NonNeg, 1,
            spmm_gpu_v4),
    // v2 (no row passes) and the paper's Eq. 7: loadable from model files, no longer the default.
    DYPE_FS("spmm.gpu.v2", OpKind::spmm, DeviceClass::gpu, kSpmmGpuV2Names, kSpmmGpuV2NonNeg, 2,
            spmm_gpu_v2),
    DYPE_FS("spmm.gpu.eq7", OpKind::spmm, DeviceClass::gpu, kSpmmGpuNames, kSpmmGpuNonNeg, 2,
            spmm_gpu),
    DYPE_FS("spmm.fpga.sextans", OpKind::spmm, DeviceClass::fpga, kSextansNames, kSextansNonNeg,
            0, spmm_fpga),
    DYPE_FS("spmm.cpu.v4", OpKind::spmm, DeviceClass::cpu, kSpmmCpuV4Names, kSpmmCpuV3NonNeg, 0,
            spmm_cpu_v4),
    // v3 (random-id gathers scaled by a hub factor): loadable from model files.
    DYPE_FS("spmm.cpu.v3", OpKind::spmm, DeviceClass::cpu, kSpmmCpuV3Names, kSpmmCpuV3NonNeg, 0,
            spmm_cpu_v3),
    // v2 (one LLC term at the reported size): loadable from model files, no longer the default.
    DYPE_FS("spmm.cpu.v2", OpKind::spmm, DeviceClass::cpu, kSpmmCpuNames, kSpmmCpuNonNeg, 0,
            spmm_cpu),
    DYPE_FS("gemm.gpu.eq8", OpKind::gemm, DeviceClass::gpu, kGemmNames, kGemmNonNeg, 5, gemm_eq8),
    DYPE_FS("gemm.fpga.eq8", OpKind::gemm, DeviceClass::fpga, kGemmNames, kGemmNonNeg, 5,
            gemm_eq8),
    DYPE_FS("gemm.cpu.v3", OpKind::gemm, DeviceClass::cpu, kGemmCpuV3Names, kGemmCpuV3NonNeg, 3,
            gemm_cpu_v3),
    DYPE_FS("gemm.cpu.v2", OpKind::gemm, DeviceClass::cpu, kGemmCpuNames, kGemmCpuNonNeg, 3, gemm_cpu),
    DYPE_FS("gemm.cpu.eq8", OpKind::gemm, DeviceClass::cpu, kGemmNames, kGemmNonNeg, 5, gemm_eq8),
    DYPE_FS("window_attention.fpga.swat", OpKind::window_attention, DeviceClass::fpga, kSwatNames,
            kSwatNonNeg, 0, wa_fpga),
    DYPE_FS("window_attention.gpu.dense", OpKind::window_attention, DeviceClass::gpu, kWaGpuNames,
            kWaGpuNonNeg, 0, wa_gpu),
    DYPE_FS("window_attention.cpu.v2", OpKind::window_attention, DeviceClass::cpu, kWaCpuV2Names,
            kWaCpuV2NonNeg, 0, wa_cpu_v2),
    DYPE_FS("window_attention.cpu.band", OpKind::window_attention, DeviceClass::cpu, kWaCpuNames,
            kWaCpuNonNeg, 0, wa_cpu),
    DYPE_FS("softmax.cpu.rows", OpKind::softmax, DeviceClass::cpu, kRowNames, kRowNonNeg, 0,
            rowwise),
    DYPE_FS("softmax.gpu.rows", OpKind::softmax, DeviceClass::gpu, kRowNames, kRowNonNeg, 0,
            rowwise),
    DYPE_FS("softmax.fpga.rows", OpKind::softmax, DeviceClass::fpga, kRowNames, kRowNonNeg, 0,
            rowwise),
    DYPE_FS("layer_norm.cpu.rows", OpKind::layer_norm, DeviceClass::cpu, kRowNames, kRowNonNeg, 0,
            rowwise),
    DYPE_FS("layer_norm.gpu.rows", OpKind::layer_norm, DeviceClass::gpu, kRowNames, kRowNonNeg, 0,
            rowwise),
    DYPE_FS("layer_norm.fpga.rows", OpKind::layer_norm, DeviceClass::fpga, kRowNames, kRowNonNeg,
            0, rowwise),
};
#undef DYPE_FS

// Defaults that depend on the library behind a device (hw::DeviceInfo::backend), ahead of the
// class's first set above. spmm.gpu.v4 models cuSPARSE's CSR SpMM on NVIDIA GPUs (32-lane warps,
// float4 rows); AMD GPUs (rocSPARSE, 64-lane wavefronts) and the emulated MI210, whose timing
// formula v3 mirrors (held-out 3.5% with v3, 28% with v4 on the same 1000 modelled points), keep v3.
struct BackendDefault {
  std::string_view backend;
  std::string_view id;
};
constexpr BackendDefault kBackendDefaults[] = {{"cuda", "spmm.gpu.v4"}};

}  // namespace

std::string_view to_string(DeviceClass cls) {
  switch (cls) {
    case DeviceClass::cpu: return "cpu";
    case DeviceClass::gpu: return "gpu";
    case DeviceClass::fpga: return "fpga";
  }
  return "unknown";
}

std::optional<DeviceClass> device_class_from_string(std::string_view name) {
  for (auto cls : {DeviceClass::cpu, DeviceClass::gpu, DeviceClass::fpga}) {
    if (to_string(cls) == name) return cls;
  }
  return std::nullopt;
}

const FeatureSet& feature_set(OpKind kind, DeviceClass cls, std::string_view backend) {
  for (const auto& b : kBackendDefaults) {
    if (b.backend != backend) continue;
    const FeatureSet* fs = feature_set_by_id(b.id);
    if (fs != nullptr && fs->kind == kind && fs->device_class == cls) return *fs;
  }
  for (const auto& fs : kSets) {
    if (fs.kind == kind && fs.device_class == cls) return fs;
  }
  throw Error("no performance-model feature set for " + std::string(kernels::to_string(kind)) +
              " on " + std::string(to_string(cls)));
}

const FeatureSet* feature_set_by_id(std::string_view id) {
  for (const auto& fs : kSets) {
    if (fs.id == id) return &fs;
  }
  return nullptr;
}

std::span<const FeatureSet> all_feature_sets() { return kSets; }

double window_band_pairs(std::int64_t seq_len, std::int64_t window) {
  if (seq_len <= 0) return 0.0;
  const double l = d(seq_len);
  const double h = d(std::min<std::int64_t>(window / 2, seq_len - 1));
  // Rows far from the edges see 2h + 1 keys; the first and last h rows lose h(h+1)/2 each.
  return l * (2.0 * h + 1.0) - h * (h + 1.0);
}

double sextans_estimate_s(const OpShape& s, const FeatureParams& p) {
  const double cycles = (d(s.nnz) + 13.0 * d(s.m)) * d(s.n) / p.sextans_nm;
  return cycles / (p.sextans_f_mhz * 1e6);
}

double swat_estimate_s(const OpShape& s, const FeatureParams& p) {
  const double cycles =
      (d(s.seq_len) * p.swat_t_pipeline + p.swat_t_init) * (d(s.window) / 1024.0);
  return cycles / (p.swat_f_mhz * 1e6);
}

}  // namespace dype::perf
