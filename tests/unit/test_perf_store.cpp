// Model store round trip, rejection of bad files with precise messages, prediction with
// extrapolation flags, online refinement (outlier-proof, versioned, resettable) and multi-device
// stage prediction.
#include <gtest/gtest.h>

#include "../test_temp_dir.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "graph/gather_locality.h"
#include "perfmodel/model_store.h"
#include "perfmodel/multi_device.h"
#include "perfmodel/synthetic.h"

namespace dype::perf {
namespace {

// A GEMM model fitted on exact synthetic data: t = 1e-6 + 1e-11 MKN.
KernelModel gemm_model() {
  const auto& fs = feature_set(OpKind::gemm, DeviceClass::gpu);
  SyntheticRanges r;
  r.max_work = 1e10;
  r.allow_timing_only = true;
  std::vector<Sample> samples;
  for (const auto& s : generate_specs(OpKind::gemm, r, 60, 1)) {
    samples.push_back({s.shape, 1e-6 + 1e-11 * work_of(s.shape)});
  }
  return KernelModel(fs, FeatureParams{}, fit_model(fs, FeatureParams{}, samples), samples);
}

ModelStore sample_store() {
  ModelStore st;
  st.device_model = "amd-mi210";
  st.device_class = DeviceClass::gpu;
  st.provenance = "modelled";
  st.host = "test";
  st.conditions = "load average 0.05 -> 0.10, 2 hardware threads";
  st.created = "2025-01-01T00:00:00Z";
  st.models.emplace(OpKind::gemm, gemm_model());
  return st;
}

OpShape gemm(std::int64_t m, std::int64_t k, std::int64_t n) {
  OpShape s;
  s.kind = OpKind::gemm;
  s.m = m;
  s.k = k;
  s.n = n;
  return s;
}

std::string error_of(const std::string& text, std::string_view expected = "amd-mi210") {
  try {
    ModelStore::parse(text, "x.json", expected);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// CPU models depend on the profiled thread count (the GEMM's row blocks): it travels with the model.
TEST(PerfStore, CpuThreadCountRoundTrips) {
  const auto& fs = feature_set(OpKind::gemm, DeviceClass::cpu);
  FeatureParams p;
  p.threads = 2;
  SyntheticRanges r;
  r.max_work = 1e9;
  std::vector<Sample> samples;
  for (const auto& s : generate_specs(OpKind::gemm, r, 80, 3)) {
    samples.push_back({s.shape, 2e-6 + 5e-12 * work_of(s.shape)});
  }
  ModelStore st;
  st.device_model = "generic-cpu";
  st.device_class = DeviceClass::cpu;
  st.provenance = "measured";
  st.models.emplace(OpKind::gemm, KernelModel(fs, p, fit_model(fs, p, samples), samples));
  const ModelStore back = ModelStore::parse(st.to_json_text(), "cpu.json", "generic-cpu");
  EXPECT_EQ(back.at(OpKind::gemm).params.threads, 2.0);
  const OpShape s = gemm(50000, 256, 256);
  EXPECT_DOUBLE_EQ(back.at(OpKind::gemm).predict_fitted_s(s), st.at(OpKind::gemm).predict_fitted_s(s));
}

// The CPU SpMM model prices each sample by its graph's miss-ratio curve, so the curve travels with
// the stored samples (refits and `dype-profile show` recompute features from them); bad curves are
// named.
TEST(PerfStore, SpmmLocalityCurvesRoundTripAndBadOnesAreNamed) {
  const auto& fs = feature_set(OpKind::spmm, DeviceClass::cpu);
  SyntheticRanges r;
  r.rows_max = 2e4;
  std::vector<Sample> samples;
  for (const auto& spec : generate_specs(OpKind::spmm, r, 40, 5)) {
    Sample x{spec.shape, 0};
    const kernels::CsrI32 a = materialise_csr(spec);
    x.shape.nnz = a.nnz();
    x.shape.locality = kernels::gather_locality(a.indices, a.cols);
    x.seconds = 1e-5 + 1e-9 * static_cast<double>(x.shape.nnz) * (1.0 + x.shape.locality.miss_at(1024));
    samples.push_back(x);
  }
  ModelStore st;
  st.device_model = "generic-cpu";
  st.device_class = DeviceClass::cpu;
  st.provenance = "measured";
  st.models.emplace(OpKind::spmm, KernelModel(fs, FeatureParams{}, fit_model(fs, FeatureParams{}, samples), samples));
  const std::string text = st.to_json_text();
  const ModelStore back = ModelStore::parse(text, "cpu.json", "generic-cpu");
  const auto& a = st.at(OpKind::spmm).samples;
  const auto& b = back.at(OpKind::spmm).samples;
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(b[i].shape.locality.known());
    EXPECT_EQ(a[i].shape.locality.miss, b[i].shape.locality.miss) << i;
  }
  auto j = nlohmann::json::parse(text);
  j["models"]["spmm"]["samples"][3][11][2] = 1.5;
  try {
    ModelStore::parse(j.dump(), "cpu.json", "generic-cpu");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("samples[3][11][2]: miss ratio outside [0, 1]"), std::string::npos) << e.what();
  }
  j["models"]["spmm"]["samples"][3][11] = {0.5, 0.5};
  try {
    ModelStore::parse(j.dump(), "cpu.json", "generic-cpu");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("samples[3][11]: expected 10 miss ratios"), std::string::npos) << e.what();
  }
}

TEST(PerfStore, RoundTripsThroughAFile) {
  const ModelStore st = sample_store();
  const auto dir = dype::test::process_temp_dir("dype_perf_store_test");
  const auto path = ModelStore::default_path(dir, st.device_model);
  st.save(path);
  const ModelStore back = ModelStore::load(path, "amd-mi210");
  EXPECT_EQ(back.device_model, "amd-mi210");
  EXPECT_EQ(back.conditions, st.conditions);
  EXPECT_EQ(back.provenance, "modelled");
  const KernelModel& a = st.at(OpKind::gemm);
  const KernelModel& b = back.at(OpKind::gemm);
  EXPECT_EQ(a.coefficients, b.coefficients);
  EXPECT_EQ(a.samples.size(), b.samples.size());
  EXPECT_EQ(a.stats.holdout, b.stats.holdout);
  EXPECT_DOUBLE_EQ(a.stats.mape_holdout, b.stats.mape_holdout);
  const OpShape s = gemm(4096, 768, 3072);
  EXPECT_DOUBLE_EQ(a.predict(s).seconds, b.predict(s).seconds);
  EXPECT_NEAR(a.predict(s).seconds, 1e-6 + 1e-11 * 4096.0 * 768 * 3072, 1e-6);
  EXPECT_EQ(back.find(OpKind::spmm), nullptr);
  EXPECT_THROW(back.at(OpKind::spmm), Error);
  std::filesystem::remove_all(dir);
}

TEST(PerfStore, RejectsBadFilesWithTheRightMessage) {
  const std::string good = sample_store().to_json_text();
  EXPECT_EQ(error_of(good), "");

  // Missing file.
  try {
    ModelStore::load("/nonexistent/dir/cpu.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/cpu.json: cannot open"), std::string::npos);
  }
  // Corrupt (truncated) JSON.
  EXPECT_NE(error_of(good.substr(0, good.size() / 2)).find("x.json: not valid JSON"), std::string::npos);
  // Another device.
  EXPECT_NE(error_of(good, "xilinx-u280").find("holds models for device 'amd-mi210', expected 'xilinx-u280'"),
            std::string::npos);

  auto mutate = [&](auto&& edit) {
    auto j = nlohmann::json::parse(good);
    edit(j);
    return error_of(j.dump());
  };
  // Non-finite coefficient: NaN is written as null by JSON writers; an overflowing literal is
  // rejected by the parser.
  EXPECT_NE(mutate([](auto& j) { j["models"]["gemm"]["coefficients"][5] = nullptr; })
                .find("x.json.models.gemm.coefficients[5]: expected a number"),
            std::string::npos);
  {
    std::string text = good;
    auto j = nlohmann::json::parse(good);
    j["models"]["gemm"]["coefficients"][2] = 12345.678;
    text = j.dump();
    text.replace(text.find("12345.678"), 9, "1e999");
    EXPECT_NE(error_of(text).find("x.json: not valid JSON"), std::string::npos) << error_of(text);
  }
  EXPECT_NE(mutate([](auto& j) { j["models"]["gemm"]["coefficients"][0] = -1.0; })
                .find("must be non-negative"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["models"]["gemm"]["coefficients"].erase(0); })
                .find("coefficients: expected an array of 7 numbers"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["models"]["gemm"]["feature_set"] = "gemm.gpu.v99"; })
                .find("unknown feature set 'gemm.gpu.v99'"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["models"]["gemm"]["feature_set"] = "spmm.gpu.eq7"; })
                .find("is for another kernel"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["models"]["convolution"] = j["models"]["gemm"]; })
                .find("unknown kernel 'convolution'"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["version"] = 2; }).find("unsupported version 2"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j.erase("device_model"); }).find("missing key 'device_model'"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["models"]["gemm"]["ranges"][1] = {5.0, 1.0}; })
                .find("ranges[1]: min > max"),
            std::string::npos);
}

TEST(PerfPredict, FlagsExtrapolationButStillAnswers) {
  const KernelModel m = gemm_model();
  const Prediction in = m.predict(gemm(2048, 512, 512));
  EXPECT_FALSE(in.extrapolated);
  const Prediction out = m.predict(gemm(1 << 22, 8192, 8192));
  EXPECT_TRUE(out.extrapolated);
  EXPECT_GE(out.out_of_range_feature, 0);
  EXPECT_GT(out.seconds, in.seconds);
  EXPECT_TRUE(std::isfinite(out.seconds));
}

TEST(PerfPredict, IsCheap) {
  const KernelModel m = gemm_model();
  constexpr int kIters = 200000;
  double sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) sink += m.predict(gemm(1000 + (i & 1023), 256, 256)).seconds;
  const double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters;
  EXPECT_GT(sink, 0);
  EXPECT_LT(per, 1e-6);  // generous for a shared, sanitized or debug machine; typical is ~20 ns
}

TEST(PerfRefine, SingleSpikeDoesNotMoveThePrediction) {
  KernelModel m = gemm_model();
  const OpShape s = gemm(4096, 768, 768);
  const double fitted = m.predict(s).seconds;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0.0, 0.03);
  // The device runs 20% slower than profiled, with 3% noise: refinement learns it.
  for (int i = 0; i < 60; ++i) {
    const OpShape si = gemm(1024 + 64 * i, 768, 768);
    m.refine(si, 1.2 * m.predict_fitted_s(si) * std::exp(noise(rng)));
  }
  const double learned = m.predict(s).seconds;
  EXPECT_NEAR(learned / fitted, 1.2, 0.05);
  const auto version = m.refinement.version;
  // One 10x spike: rejected, prediction unchanged (well within a few percent).
  EXPECT_EQ(m.refine(s, 10 * learned), RefineOutcome::rejected_outlier);
  EXPECT_NEAR(m.predict(s).seconds / learned, 1.0, 0.02);
  EXPECT_EQ(m.refinement.version, version);
  // A spike in the first sample after a fit is rejected too.
  KernelModel fresh = gemm_model();
  EXPECT_EQ(fresh.refine(s, 10 * fitted), RefineOutcome::rejected_outlier);
  EXPECT_DOUBLE_EQ(fresh.predict(s).seconds, fitted);
  // Reset returns to the fit.
  m.reset_refinement();
  EXPECT_EQ(m.refinement.version, 0u);
  EXPECT_DOUBLE_EQ(m.predict(s).seconds, fitted);
}

TEST(PerfRefine, SustainedShiftIsLearnedAsRegimeChange) {
  KernelModel m = gemm_model();
  const OpShape s = gemm(4096, 768, 768);
  const double fitted = m.predict(s).seconds;
  RefineOutcome last = RefineOutcome::rejected_outlier;
  int seen = 0;
  for (int i = 0; i < 20 && last != RefineOutcome::accepted_regime_change; ++i, ++seen) {
    last = m.refine(s, 3.0 * fitted);
  }
  EXPECT_EQ(last, RefineOutcome::accepted_regime_change);
  EXPECT_EQ(seen, RefineOptions{}.regime_change_after);
  EXPECT_NEAR(m.predict(s).seconds / fitted, 3.0, 0.1);
}

TEST(PerfRefine, RefinementStateRoundTrips) {
  ModelStore st = sample_store();
  KernelModel& m = st.at(OpKind::gemm);
  for (int i = 0; i < 10; ++i) m.refine(gemm(2048, 768, 768), 1.1 * m.predict_fitted_s(gemm(2048, 768, 768)));
  const ModelStore back = ModelStore::parse(st.to_json_text(), "mem");
  EXPECT_EQ(back.at(OpKind::gemm).refinement.version, m.refinement.version);
  EXPECT_DOUBLE_EQ(back.at(OpKind::gemm).predict(gemm(2048, 768, 768)).seconds,
                   m.predict(gemm(2048, 768, 768)).seconds);
}

// A refinement restored on another host keeps its correction as a prior, but new measurements move it
// as fast as a fresh one's, and the shape history (that host's ratios) is gone.
TEST(PerfRefine, LoweredTrustKeepsTheCorrectionAndLearnsAgainQuickly) {
  KernelModel m = gemm_model();
  for (int i = 0; i < 60; ++i) {
    const OpShape si = gemm(1024 + 64 * (i % 8), 768, 768);
    m.refine(si, 1.2 * m.predict_fitted_s(si));
  }
  const OpShape s = gemm(4096, 768, 768);
  const double before = m.predict(s).seconds / m.predict_fitted_s(s);
  ASSERT_FALSE(m.refinement.history.empty());
  KernelModel trusted = m;
  m.refinement.lower_trust();
  const KernelModel fresh = gemm_model();
  EXPECT_TRUE(m.refinement.history.empty());
  EXPECT_DOUBLE_EQ(m.predict(s).seconds / m.predict_fitted_s(s), before);  // the correction is kept
  EXPECT_DOUBLE_EQ(m.refinement.p00, fresh.refinement.p00);
  EXPECT_DOUBLE_EQ(m.refinement.p11, fresh.refinement.p11);
  // This host runs at the fit (1.0x), on shapes neither saw: the lowered-trust model moves towards it
  // faster (measured: 1.129 against 1.147 after 5 samples; RLS forgetting keeps the trusted one
  // from being stiff, so the difference is modest).
  for (int i = 0; i < 5; ++i) {
    const OpShape si = gemm(2048 + 128 * i, 768, 768);
    m.refine(si, m.predict_fitted_s(si));
    trusted.refine(si, trusted.predict_fitted_s(si));
  }
  const double lowered_f = m.predict(s).seconds / m.predict_fitted_s(s);
  const double trusted_f = trusted.predict(s).seconds / trusted.predict_fitted_s(s);
  EXPECT_LT(lowered_f, trusted_f - 0.01) << lowered_f << " vs " << trusted_f;
  EXPECT_GT(lowered_f, 1.0);
}

// Two shapes of similar size that the fit mispredicts in opposite directions (+35% and -25%), run
// alternately as a request's two GEMMs would: one correction in the size feature cannot fit both
// and swings between them; each shape's history predicts its own time.
TEST(PerfRefine, ShapeHistoryFitsShapesTheSizeCorrectionCannot) {
  const OpShape up = gemm(4096, 768, 768), down = gemm(4096, 768, 640);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0.0, 0.03);
  auto run = [&](KernelModel& m, const RefineOptions& o, std::vector<double>* swing) {
    for (int i = 0; i < 40; ++i) {
      m.refine(up, 1.35 * m.predict_fitted_s(up) * std::exp(noise(rng)), o);
      if (swing) swing->push_back(m.predict(up).seconds);
      m.refine(down, 0.75 * m.predict_fitted_s(down) * std::exp(noise(rng)), o);
      if (swing) swing->push_back(m.predict(up).seconds);
    }
  };
  KernelModel with = gemm_model(), without = gemm_model();
  RefineOptions off;
  off.history_shapes = 0;
  std::vector<double> swing_with, swing_without;
  run(with, {}, &swing_with);
  run(without, off, &swing_without);
  const double fu = with.predict_fitted_s(up), fd = with.predict_fitted_s(down);
  EXPECT_NEAR(with.predict(up).seconds / fu, 1.35, 0.05);
  EXPECT_NEAR(with.predict(down).seconds / fd, 0.75, 0.04);
  // The size correction alone misses at least one of them by far.
  const double miss = std::max(std::fabs(without.predict(up).seconds / (1.35 * fu) - 1.0),
                               std::fabs(without.predict(down).seconds / (0.75 * fd) - 1.0));
  EXPECT_GT(miss, 0.15);
  // Over the last 20 launches, the prediction for `up` stays put with the history.
  auto spread = [](const std::vector<double>& v) {
    const auto [lo, hi] = std::minmax_element(v.end() - 20, v.end());
    return *hi / *lo - 1.0;
  };
  EXPECT_LT(spread(swing_with), 0.06);
  // Unseen shapes still get the size correction (the history is per exact shape).
  const OpShape other = gemm(4096, 768, 704);
  EXPECT_EQ(with.refinement.history_of(shape_key(other)), nullptr);
  KernelModel no_history = with;
  no_history.refinement.history.clear();
  EXPECT_DOUBLE_EQ(with.predict(other).seconds, no_history.predict(other).seconds);
}

TEST(PerfRefine, ShapeHistoryIgnoresOneSpikeAndFollowsARealShift) {
  KernelModel m = gemm_model();
  const OpShape s = gemm(2048, 1024, 256);
  const double fitted = m.predict_fitted_s(s);
  for (int i = 0; i < 5; ++i) m.refine(s, 1.1 * fitted);
  EXPECT_NEAR(m.predict(s).seconds / fitted, 1.1, 1e-9);
  m.refine(s, 10 * fitted);  // one spike among the five kept
  EXPECT_NEAR(m.predict(s).seconds / fitted, 1.1, 1e-9);
  // The device really got 2x slower for this shape: the majority of the kept samples decides.
  m.refine(s, 2.2 * fitted);
  m.refine(s, 2.2 * fitted);
  EXPECT_NEAR(m.predict(s).seconds / fitted, 2.2, 1e-9);
  // Fewer than kMinSamples of a shape: the size correction answers.
  KernelModel fresh = gemm_model();
  fresh.refine(s, 1.5 * fitted);
  fresh.refine(s, 1.5 * fitted);
  ASSERT_EQ(fresh.refinement.history_of(shape_key(s))->count, 2);
  EXPECT_LT(fresh.predict(s).seconds / fitted, 1.3);
  fresh.refine(s, 1.5 * fitted);
  EXPECT_NEAR(fresh.predict(s).seconds / fitted, 1.5, 1e-9);
  fresh.reset_refinement();
  EXPECT_EQ(fresh.refinement.history_of(shape_key(s)), nullptr);
  EXPECT_DOUBLE_EQ(fresh.predict(s).seconds, fitted);
}

TEST(PerfRefine, ShapeHistoryKeepsTheMostRecentlyUsedShapes) {
  KernelModel m = gemm_model();
  RefineOptions o;
  o.history_shapes = 4;
  std::vector<OpShape> shapes;
  for (int i = 0; i < 6; ++i) shapes.push_back(gemm(1024 + 128 * i, 512, 512));
  for (const auto& s : shapes) m.refine(s, 1.2 * m.predict_fitted_s(s), o);
  m.refine(shapes[2], 1.2 * m.predict_fitted_s(shapes[2]), o);  // used again: survives the next one
  m.refine(gemm(99, 99, 99), 1.0, o);
  EXPECT_EQ(m.refinement.history.size(), 4u);
  EXPECT_EQ(m.refinement.history_of(shape_key(shapes[0])), nullptr);
  EXPECT_EQ(m.refinement.history_of(shape_key(shapes[1])), nullptr);
  EXPECT_EQ(m.refinement.history_of(shape_key(shapes[3])), nullptr);
  EXPECT_NE(m.refinement.history_of(shape_key(shapes[2])), nullptr);
  EXPECT_NE(m.refinement.history_of(shape_key(shapes[5])), nullptr);
  EXPECT_NE(shape_key(gemm(1, 2, 3)), shape_key(gemm(1, 3, 2)));
  EXPECT_NE(shape_key(gemm(1, 2, 3)), 0u);
}

TEST(PerfRefine, ShapeHistoryRoundTripsAndBadEntriesAreNamed) {
  ModelStore st = sample_store();
  KernelModel& m = st.at(OpKind::gemm);
  const OpShape a = gemm(2048, 768, 768), b = gemm(512, 256, 128);
  for (int i = 0; i < 7; ++i) m.refine(a, (1.3 + 0.01 * i) * m.predict_fitted_s(a));
  for (int i = 0; i < 3; ++i) m.refine(b, 0.8 * m.predict_fitted_s(b));
  const std::string text = st.to_json_text();
  const ModelStore back = ModelStore::parse(text, "mem");
  const KernelModel& mb = back.at(OpKind::gemm);
  EXPECT_DOUBLE_EQ(mb.predict(a).seconds, m.predict(a).seconds);
  EXPECT_DOUBLE_EQ(mb.predict(b).seconds, m.predict(b).seconds);
  // The ring continues where it stopped: one more sample evicts the same oldest value.
  KernelModel m2 = m, mb2 = mb;
  m2.refine(a, 5.0 * m2.predict_fitted_s(a));
  mb2.refine(a, 5.0 * mb2.predict_fitted_s(a));
  EXPECT_DOUBLE_EQ(mb2.predict(a).seconds, m2.predict(a).seconds);

  auto mutate = [&](auto&& edit) {
    auto j = nlohmann::json::parse(text);
    edit(j["models"]["gemm"]["refinement"]["shape_history"]);
    return error_of(j.dump());
  };
  EXPECT_NE(mutate([](auto& h) { h[0]["shape_key"] = "xyz"; })
                .find("x.json.models.gemm.refinement.shape_history[0].shape_key: expected 16 hex digits"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& h) { h[1]["log_ratios"] = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1}; })
                .find("shape_history[1].log_ratios: expected 1 to 5 numbers"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& h) { h[0]["log_ratios"][0] = nullptr; })
                .find("shape_history[0].log_ratios[0]: expected a number"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& h) { h[1]["shape_key"] = h[0]["shape_key"]; }).find("shape_history[1].shape_key: appears twice"),
            std::string::npos);
  EXPECT_NE(mutate([](auto& h) { h[0].erase("log_ratios"); }).find("missing key 'log_ratios'"), std::string::npos);
}

TEST(PerfMultiDevice, SplitAndTransfersAddUp) {
  const KernelModel m = gemm_model();
  const OpShape s = gemm(16384, 768, 3072);
  const StageLink link{10e9, 1e-6};
  const auto one = predict_stage(m, s, 1, link);
  EXPECT_EQ(one.scatter_s, 0.0);
  EXPECT_EQ(one.gather_s, 0.0);
  EXPECT_DOUBLE_EQ(one.total_s, m.predict(s).seconds);
  const auto two = predict_stage(m, s, 2, link);
  EXPECT_EQ(two.part.m, 8192);
  EXPECT_NEAR(two.scatter_s, 4.0 * 16384 * 768 / 10e9 + 2e-6, 1e-12);
  EXPECT_NEAR(two.gather_s, 4.0 * 16384 * 3072 / 10e9 + 2e-6, 1e-12);
  EXPECT_NEAR(two.total_s, two.scatter_s + two.compute_s + two.gather_s, 1e-15);
  EXPECT_LT(two.compute_s, one.compute_s * 0.6);
  EXPECT_THROW(predict_stage(m, s, 0, link), Error);

  // SpMM on a power-law graph: the heaviest row bounds the balance.
  OpShape sp;
  sp.kind = OpKind::spmm;
  sp.m = sp.k = 100000;
  sp.n = 64;
  sp.nnz = 1000000;
  sp.degree_skew = 3000;  // heaviest row = 30000 nnz
  EXPECT_EQ(split_shape(sp, 4).nnz, 250000);
  EXPECT_EQ(split_shape(sp, 64).nnz, 30000);
  EXPECT_DOUBLE_EQ(scatter_bytes(sp, 4), 4 * 4.0 * 100000 * 64);  // X broadcast

  OpShape wa;
  wa.kind = OpKind::window_attention;
  wa.seq_len = 4096;
  wa.window = 512;
  wa.heads = 12;
  wa.head_dim = 64;
  EXPECT_EQ(split_shape(wa, 3).heads, 4);
  const OpShape chunk = split_shape(wa, 16);
  EXPECT_EQ(chunk.heads, 12);
  EXPECT_EQ(chunk.seq_len, 4096 / 16 + 512);
}

}  // namespace
}  // namespace dype::perf
