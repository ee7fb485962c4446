// Performance-model fitting: NNLS recovers known coefficients from noisy synthetic data, keeps
// constrained coefficients non-negative, ignores timing spikes, and the synthetic generator spans
// the ranges the issue asks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "common/error.h"
#include "graph/characteristics.h"
#include "perfmodel/features.h"
#include "perfmodel/regression.h"
#include "perfmodel/synthetic.h"
#include "perfmodel/timing.h"

namespace dype::perf {
namespace {

std::vector<Sample> timed(const FeatureSet& fs, const std::vector<double>& coeffs,
                          std::span<const InputSpec> specs, double noise, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  std::vector<Sample> out;
  double f[kMaxFeatures];
  for (const auto& s : specs) {
    fs.compute(s.shape, FeatureParams{}, f);
    double t = 0;
    for (int j = 0; j < fs.size(); ++j) t += coeffs[static_cast<std::size_t>(j)] * f[j];
    out.push_back({s.shape, t * std::exp(noise * n01(rng))});  // multiplicative noise
  }
  return out;
}

TEST(PerfFit, NnlsRecoversExactCoefficients) {
  Eigen::MatrixXd a(6, 2);
  a << 1, 1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1;
  Eigen::VectorXd t = a * Eigen::Vector2d(2.0, 0.5);
  const bool nn[] = {true, true};
  const Eigen::VectorXd c = fit_relative_nnls(a, t, nn);
  EXPECT_NEAR(c(0), 2.0, 1e-9);
  EXPECT_NEAR(c(1), 0.5, 1e-9);
}

TEST(PerfFit, NnlsKeepsConstrainedCoefficientsNonNegative) {
  // The unconstrained optimum has a negative intercept; NNLS must clamp it to 0.
  Eigen::MatrixXd a(5, 2);
  a << 1, 1, 2, 1, 3, 1, 4, 1, 5, 1;
  Eigen::VectorXd t(5);
  t << 0.5, 1.6, 2.7, 3.8, 4.9;  // ~ 1.1 x - 0.6
  const bool nn[] = {true, true};
  const Eigen::VectorXd c = fit_relative_nnls(a, t, nn);
  EXPECT_EQ(c(1), 0.0);
  // With the intercept at 0, the relative-error optimum is sum(x/t) / sum(x^2/t^2).
  double sx = 0, sxx = 0;
  for (int i = 0; i < 5; ++i) {
    sx += a(i, 0) / t(i);
    sxx += a(i, 0) * a(i, 0) / (t(i) * t(i));
  }
  EXPECT_NEAR(c(0), sx / sxx, 1e-9);
  const bool free_intercept[] = {true, false};
  const Eigen::VectorXd cf = fit_relative_nnls(a, t, free_intercept);
  EXPECT_LT(cf(1), 0.0);  // left free, it goes negative
}

TEST(PerfFit, NnlsRejectsBadInput) {
  Eigen::MatrixXd a(3, 1);
  a << 1, 2, 3;
  Eigen::VectorXd t(3);
  t << 1, 0, 3;
  const bool nn[] = {true};
  EXPECT_THROW(fit_relative_nnls(a, t, nn), Error);
}

TEST(PerfFit, RecoversGpuSpmmCoefficientsFromNoisyData) {
  const auto& fs = *feature_set_by_id("spmm.gpu.eq7");
  SyntheticRanges r;
  r.allow_timing_only = true;  // timing-only specs are fine: nothing is materialised
  r.max_work = 1e13;
  const auto specs = generate_specs(OpKind::spmm, r, 300, 7);
  // t = 1e-9 N + 2e-10 nnz + 5e-3 GFLOP + 1e-6 arm + 2e-5 s
  const std::vector<double> truth = {1e-9, 2e-10, 5e-3, 1e-6, 2e-5};
  const auto samples = timed(fs, truth, specs, 0.03, 11);
  const FitResult fit = fit_model(fs, FeatureParams{}, samples);
  // The dominant terms are identified to a few percent; hold-out error is at the noise level.
  EXPECT_NEAR(fit.coefficients[1] / truth[1], 1.0, 0.1);
  EXPECT_NEAR(fit.coefficients[2] / truth[2], 1.0, 0.1);
  EXPECT_NEAR(fit.coefficients[4] / truth[4], 1.0, 0.15);
  EXPECT_LT(fit.stats.mape_holdout, 0.05);
  EXPECT_GT(fit.stats.r2_holdout, 0.98);
  EXPECT_EQ(fit.stats.holdout, 60);
}

TEST(PerfFit, RecoversGemmEq8AndIgnoresSpikes) {
  const auto& fs = feature_set(OpKind::gemm, DeviceClass::gpu);
  SyntheticRanges r;
  r.allow_timing_only = true;
  r.max_work = 1e13;
  const auto specs = generate_specs(OpKind::gemm, r, 250, 3);
  const std::vector<double> truth = {1e-8, 1e-8, 2e-11, 1e-11, 1e-11, 4e-13, 1e-5};
  auto samples = timed(fs, truth, specs, 0.02, 5);
  // Ten training points get a 10x spike (a preempted run): the robust pass must drop them.
  for (std::size_t i = 0; i < samples.size(); i += 25) samples[i].seconds *= 10;
  const FitResult fit = fit_model(fs, FeatureParams{}, samples);
  EXPECT_NEAR(fit.coefficients[5] / truth[5], 1.0, 0.05);
  EXPECT_GE(fit.stats.rejected, 5);
  for (double c : fit.coefficients) EXPECT_GE(c, 0.0);
  // Hold-out MAPE is dominated by any spiked held-out points; the median point is accurate.
  EXPECT_LT(fit.stats.mape_train, 0.05);
}

TEST(PerfFit, FpgaScaleOnSextansFeature) {
  const auto& fs = feature_set(OpKind::spmm, DeviceClass::fpga);
  SyntheticRanges r;
  r.allow_timing_only = true;
  r.max_work = 1e13;
  const auto specs = generate_specs(OpKind::spmm, r, 80, 9);
  const auto samples = timed(fs, {0.62, 3e-5}, specs, 0.01, 1);
  const FitResult fit = fit_model(fs, FeatureParams{}, samples);
  EXPECT_NEAR(fit.coefficients[0], 0.62, 0.01);
  EXPECT_LT(fit.stats.mape_holdout, 0.02);
}

TEST(PerfFit, TooFewSamplesIsAnError) {
  const auto& fs = feature_set(OpKind::gemm, DeviceClass::cpu);
  std::vector<Sample> few(3, Sample{OpShape{OpKind::gemm, 10, 10, 10}, 1e-3});
  EXPECT_THROW(fit_model(fs, FeatureParams{}, few), Error);
}

TEST(PerfFeatures, PaperFormulas) {
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = 1000;
  s.k = 1000;
  s.n = 64;
  s.nnz = 10000;
  double f[kMaxFeatures];
  feature_set_by_id("spmm.gpu.eq7")->compute(s, FeatureParams{}, f);
  const double gflop = (2.0 * 10000 * 64 - 1000.0 * 64) * 1e-9;
  EXPECT_DOUBLE_EQ(f[2], gflop);
  EXPECT_DOUBLE_EQ(f[3], gflop * 1e9 / (8.0 * (10000 + 1000.0 * 64)));
  // Sextans: (nnz + 13 M) N / N_M cycles at 215 MHz.
  EXPECT_NEAR(sextans_estimate_s(s, FeatureParams{}), (10000 + 13000.0) * 64 / 640 / 215e6, 1e-15);
  OpShape w;
  w.kind = OpKind::window_attention;
  w.seq_len = 4096;
  w.window = 1024;
  EXPECT_NEAR(swat_estimate_s(w, FeatureParams{}), (4096 * 201.0 + 904) * 1.0 / 421e6, 1e-15);
  // Band: brute-force count on a small case.
  for (std::int64_t l : {1, 5, 17}) {
    for (std::int64_t win : {0, 2, 4, 40}) {
      double count = 0;
      for (std::int64_t i = 0; i < l; ++i)
        for (std::int64_t j = 0; j < l; ++j) count += std::abs(i - j) <= win / 2 ? 1 : 0;
      EXPECT_DOUBLE_EQ(window_band_pairs(l, win), count) << l << " " << win;
    }
  }
  EXPECT_THROW(feature_set(OpKind::spmm, static_cast<DeviceClass>(9)), Error);
  for (const auto& fs : all_feature_sets()) {
    EXPECT_EQ(feature_set_by_id(fs.id), &fs);
    EXPECT_LE(fs.size(), kMaxFeatures);
    EXPECT_EQ(fs.names.size(), fs.non_negative.size());
  }
}

TEST(PerfSynthetic, SpansTheRequestedRanges) {
  SyntheticRanges r;
  r.allow_timing_only = true;
  r.max_work = 1e14;
  const auto spmm = generate_specs(OpKind::spmm, r, 2000, 1);
  double dmin = 1, dmax = 0, rmin = 1e9, rmax = 0, nmin = 1e9, nmax = 0;
  int power = 0, timing_only = 0;
  for (const auto& s : spmm) {
    dmin = std::min(dmin, s.shape.density());
    dmax = std::max(dmax, s.shape.density());
    rmin = std::min(rmin, static_cast<double>(s.shape.m));
    rmax = std::max(rmax, static_cast<double>(s.shape.m));
    nmin = std::min(nmin, static_cast<double>(s.shape.n));
    nmax = std::max(nmax, static_cast<double>(s.shape.n));
    power += s.degrees == DegreeDistribution::power_law;
    timing_only += s.timing_only;
  }
  EXPECT_LT(dmin, 3e-6);  // 1/rows floor: ~1e-6 at a million rows
  EXPECT_GT(dmax, 5e-3);
  EXPECT_LE(dmax, 1e-2 * 1.0001);
  EXPECT_LT(rmin, 1.5e3);
  EXPECT_GT(rmax, 5e5);
  EXPECT_LT(nmin, 20);
  EXPECT_GT(nmax, 900);
  EXPECT_GT(power, 800);
  EXPECT_LT(power, 1200);
  EXPECT_GT(timing_only, 0);

  const auto wa = generate_specs(OpKind::window_attention, r, 500, 2);
  for (const auto& s : wa) {
    EXPECT_GE(s.shape.seq_len, 1024);
    EXPECT_LE(s.shape.seq_len, 16384);
    EXPECT_LE(s.shape.window, s.shape.seq_len);
    EXPECT_GE(s.shape.window, 512);
    EXPECT_LE(s.shape.window, 4096);
  }
  // Caps are honoured and generation is deterministic.
  SyntheticRanges small;
  small.max_work = 1e8;
  small.max_bytes = 64e6;
  const auto a = generate_specs(OpKind::gemm, small, 100, 4);
  const auto b = generate_specs(OpKind::gemm, small, 100, 4);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(work_of(a[i].shape), 1e8);
    EXPECT_FALSE(a[i].timing_only);
    EXPECT_EQ(a[i].shape.m, b[i].shape.m);
    EXPECT_EQ(a[i].shape.k, b[i].shape.k);
  }
}

TEST(PerfSynthetic, MaterialisedCsrMatchesSpec) {
  InputSpec spec;
  spec.shape.kind = OpKind::spmm;
  spec.shape.m = spec.shape.k = 20000;
  spec.shape.nnz = 200000;
  spec.seed = 42;
  for (auto dist : {DegreeDistribution::uniform, DegreeDistribution::power_law}) {
    spec.degrees = dist;
    const auto a = materialise_csr(spec);
    ASSERT_EQ(a.indptr.size(), 20001u);
    EXPECT_NEAR(static_cast<double>(a.nnz()), 200000.0, 200000.0 * 0.05);
    for (std::int64_t i = 0; i < a.rows; ++i) {
      for (auto p = a.indptr[static_cast<std::size_t>(i)] + 1; p < a.indptr[static_cast<std::size_t>(i + 1)]; ++p) {
        ASSERT_LT(a.indices[static_cast<std::size_t>(p - 1)], a.indices[static_cast<std::size_t>(p)]);
      }
    }
    const double skew = kernels::degree_skew(a.indptr);
    // Share of the nonzeros in the 1% most referenced columns: hubs are hubs in both directions in
    // the power-law (Chung-Lu) graphs, uniform ones spread their columns.
    std::vector<std::int64_t> col_count(static_cast<std::size_t>(a.cols), 0);
    for (auto c : a.indices) ++col_count[static_cast<std::size_t>(c)];
    std::sort(col_count.begin(), col_count.end(), std::greater<>());
    double top = 0;
    for (std::size_t c = 0; c < col_count.size() / 100; ++c) top += static_cast<double>(col_count[c]);
    const double top_share = top / static_cast<double>(a.nnz());
    if (dist == DegreeDistribution::uniform) {
      EXPECT_LT(skew, 3.0);
      EXPECT_LT(top_share, 0.03);
    } else {
      EXPECT_GT(skew, 10.0);
      EXPECT_GT(top_share, 0.15);
    }
  }
}

TEST(PerfTiming, MedianWithOutlierRejection) {
  int call = 0;
  // 1 ms runs with one 10x spike: the spike is rejected and the median is 1 ms.
  const auto r = time_repeated([&] { return (++call == 4) ? 1e-2 : 1e-3 * (1.0 + 0.001 * (call % 3)); },
                               TimingPolicy{.warmup = 1, .min_reps = 9, .max_reps = 9});
  EXPECT_EQ(r.reps, 9);
  EXPECT_EQ(r.rejected, 1);
  EXPECT_NEAR(r.median_s, 1e-3, 2e-6);
  EXPECT_THROW(time_repeated([] { return -1.0; }), Error);
}


TEST(PerfFeatures, GpuSpmmDefaultPricesCacheMissesAndSkew) {
  const auto& fs = feature_set(OpKind::spmm, DeviceClass::gpu);
  EXPECT_EQ(fs.id, "spmm.gpu.v3");
  FeatureParams p;
  p.llc_bytes = 8.0 * 1024 * 1024;
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = 1000;
  s.n = 64;
  s.nnz = 50000;
  s.k = 1000;  // X is 256 KB: fits, no gather misses
  double f[kMaxFeatures];
  fs.compute(s, p, f);
  double eq7[kMaxFeatures];
  feature_set_by_id("spmm.gpu.eq7")->compute(s, p, eq7);
  for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(f[i], eq7[i]) << fs.names[i];  // Eq. 7 comes first
  EXPECT_DOUBLE_EQ(f[5], 1000.0 * 64);
  EXPECT_DOUBLE_EQ(f[6], 0.0);
  EXPECT_DOUBLE_EQ(f[7], 0.0);  // skew unknown (0) or 1: no imbalance term
  EXPECT_DOUBLE_EQ(f[8], 1000.0);
  s.k = 4 * 32768;  // X is 4x the cache: three quarters of the gathers miss
  s.degree_skew = 8.0;
  fs.compute(s, p, f);
  EXPECT_NEAR(f[6], 64.0 * 50000 * 0.75, 1e-6);
  const double bytes = 8.0 * 50000 + 4.0 * 1000 + 4.0 * 1000 * 64 + 4.0 * f[6] + p.llc_bytes;
  EXPECT_NEAR(f[7], bytes * 3.0, 1e-3);
  // Row passes of a 64-lane wavefront: 64 columns take one pass, 65 two, 20 still one.
  EXPECT_DOUBLE_EQ(f[9], 1000.0);
  s.n = 65;
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[9], 2000.0);
  s.n = 20;
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[9], 1000.0);
}

TEST(PerfFeatures, CpuSpmmLadderHubsAndOutput) {
  const auto& fs = *feature_set_by_id("spmm.cpu.v3");
  FeatureParams p;
  p.l1_bytes = 48.0 * 1024;
  p.l2_bytes = 2.0 * 1024 * 1024;
  p.simd_floats = 16;
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = s.k = 1 << 16;
  s.n = 20;  // X is 5 MiB: beyond L2 only; rows padded to 32 floats
  s.nnz = 1 << 20;
  s.degree_skew = 1.0;
  double f[kMaxFeatures];
  fs.compute(s, p, f);
  const double stream = 32.0 * (1 << 20);
  const double x_bytes = 4.0 * 20 * (1 << 16);
  EXPECT_DOUBLE_EQ(f[0], stream);
  EXPECT_NEAR(f[2], stream * (1 - p.l2_bytes / x_bytes), 1e-3);
  EXPECT_DOUBLE_EQ(f[3], 0.0);  // fits in 4 x L2
  EXPECT_DOUBLE_EQ(f[9], static_cast<double>(1 << 20));  // one 128-column block per row
  EXPECT_NEAR(f[12], 20.0 * (1 << 16) * (1 - p.l2_bytes / x_bytes), 1e-3);  // Y is X's size
  // A hub-heavy graph: cache-missing gathers shrink by 1 / (1 + 0.1 log2 skew); the stream does not.
  s.degree_skew = 1024.0;
  double g[kMaxFeatures];
  fs.compute(s, p, g);
  EXPECT_DOUBLE_EQ(g[0], f[0]);
  EXPECT_NEAR(g[2], f[2] / 2.0, 1e-3);
  EXPECT_NEAR(g[6], f[6] / 2.0, 1e-3);
}

// v4 prices each level's gathers by the graph's own miss-ratio curve relative to random columns.
TEST(PerfFeatures, CpuSpmmV4ScalesGathersByTheGraphsLocality) {
  const auto& fs = feature_set(OpKind::spmm, DeviceClass::cpu);
  EXPECT_EQ(fs.id, "spmm.cpu.v4");
  FeatureParams p;
  p.l2_bytes = 2.0 * 1024 * 1024;
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = s.k = 1 << 16;
  s.n = 64;  // X is 16 MiB: beyond L2 and 4 x L2
  s.nnz = 1 << 20;
  s.degree_skew = 1024.0;  // ignored by v4: the curve says what hubs do
  double unknown[kMaxFeatures], random[kMaxFeatures], local[kMaxFeatures];
  fs.compute(s, p, unknown);
  s.locality = kernels::GatherLocality::uniform(s.k, s.nnz);
  fs.compute(s, p, random);
  for (int i = 0; i < fs.size(); ++i) EXPECT_DOUBLE_EQ(unknown[i], random[i]) << fs.names[static_cast<std::size_t>(i)];
  const double x_bytes = 4.0 * 64 * (1 << 16);
  EXPECT_NEAR(random[2], 64.0 * (1 << 20) * (1 - p.l2_bytes / x_bytes), 1e-3);  // v3 without hubs
  // A graph that misses a quarter as often as random ids at every level.
  for (std::size_t l = 0; l < s.locality.miss.size(); ++l) s.locality.miss[l] *= 0.25f;
  fs.compute(s, p, local);
  EXPECT_DOUBLE_EQ(local[0], random[0]);  // the multiply-add stream does not change
  EXPECT_NEAR(local[2], random[2] * 0.25, random[2] * 1e-6);
  EXPECT_NEAR(local[3], random[3] * 0.25, random[3] * 1e-6);
  EXPECT_NEAR(local[6], random[6] * 0.25, random[6] * 1e-6);
}

// CUDA devices default to v4: passes of 128 columns when N % 4 == 0 (float4 lanes), of 32 otherwise;
// gathers beyond a quarter of the L2 priced by the graph's own miss-ratio curve; Y beyond it.
TEST(PerfFeatures, CudaSpmmV4PricesAlignedWidthsAndTheGraphsMisses) {
  EXPECT_EQ(feature_set(OpKind::spmm, DeviceClass::gpu).id, "spmm.gpu.v3");  // other GPUs, emulated ones
  EXPECT_EQ(feature_set(OpKind::spmm, DeviceClass::gpu, "hip").id, "spmm.gpu.v3");
  EXPECT_EQ(feature_set(OpKind::gemm, DeviceClass::gpu, "cuda").id, "gemm.gpu.eq8");
  const auto& fs = feature_set(OpKind::spmm, DeviceClass::gpu, "cuda");
  ASSERT_EQ(fs.id, "spmm.gpu.v4");
  EXPECT_EQ(fs.names[static_cast<std::size_t>(fs.size_feature)], "nnz*passes128");
  FeatureParams p;
  p.llc_bytes = 64.0 * 1024 * 1024;  // 16 MiB of it for X's gathers
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = s.k = 1 << 14;
  s.nnz = 1 << 18;
  s.n = 128;  // X and Y are 8 MiB: no misses
  double f[kMaxFeatures];
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_DOUBLE_EQ(f[1], 1.0 * (1 << 18));  // one 128-column pass per nonzero
  EXPECT_DOUBLE_EQ(f[2], 1.0 * (1 << 14));  // one pass per row
  EXPECT_DOUBLE_EQ(f[3], 0.0);
  EXPECT_DOUBLE_EQ(f[4], 0.0);
  EXPECT_DOUBLE_EQ(f[5], 0.0);
  s.n = 130;  // not a multiple of 4: a float per lane, 5 passes of 32 columns per row
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[1], 2.0 * (1 << 18));
  EXPECT_DOUBLE_EQ(f[2], 5.0 * (1 << 14));
  s.n = 16;  // the small-N floor: a whole pass whatever the width
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[1], 1.0 * (1 << 18));
  EXPECT_DOUBLE_EQ(f[2], 1.0 * (1 << 14));
  // X and Y of 1 << 20 rows x 64 floats are 256 MiB: 1 - 16/256 of Y beyond L2; the gathers miss
  // as the curve says at 16 MiB / 256 B = 64k rows (random ids: 1 - 64k / 1M).
  s.m = s.k = 1 << 20;
  s.nnz = 1 << 22;
  s.n = 64;
  fs.compute(s, p, f);
  const double random_miss = 1.0 - 65536.0 / (1 << 20);
  EXPECT_NEAR(f[4], (1 << 22) * random_miss, 1.0);
  EXPECT_NEAR(f[3], 64.0 * (1 << 22) * random_miss, 64.0);
  EXPECT_NEAR(f[5], 64.0 * (1 << 20) * (1.0 - 16.0 / 256), 1e-3);
  s.locality = kernels::GatherLocality::uniform(s.k, s.nnz);
  for (float& m : s.locality.miss) m *= 0.5f;  // a graph that misses half as often
  fs.compute(s, p, f);
  EXPECT_NEAR(f[4], (1 << 22) * random_miss * 0.5, 1.0);
}

TEST(PerfFeatures, CpuGemmBlocksFollowTheThreadCount) {
  const auto& fs = feature_set(OpKind::gemm, DeviceClass::cpu);
  EXPECT_EQ(fs.id, "gemm.cpu.v3");
  FeatureParams p;
  OpShape s;
  s.kind = OpKind::gemm;
  s.m = 100000;
  s.k = 128;
  s.n = 128;
  double f[kMaxFeatures];
  p.threads = 1;  // one oneDNN call
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[13], 1.0);
  EXPECT_DOUBLE_EQ(f[14], 128.0 * 128);
  p.threads = 2;  // ~8 blocks a thread of ceil(100000 / 16) = 6250 rows: 16 calls
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[13], 16.0);
  s.m = 200;  // below the 256-row minimum block: a single call whatever the threads
  fs.compute(s, p, f);
  EXPECT_DOUBLE_EQ(f[13], 1.0);
  EXPECT_DOUBLE_EQ(f[5], 0.0);  // N = 128 is a SIMD multiple: no tail kernels
}

}  // namespace
}  // namespace dype::perf
