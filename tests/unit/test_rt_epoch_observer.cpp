// EpochObserver: answered requests counted under their plan epoch, in epoch order even when a
// retired pipeline's request finishes after the next one's first, the latest kMaxEpochs kept; and
// DriftWatch, what the drift detector says it watches (the status page's two new inputs).
#include <gtest/gtest.h>

#include <thread>

#include "runtime/epoch_observer.h"
#include "runtime/planning/drift.h"

namespace dype::rt {
namespace {

RequestEvent answered(std::uint64_t epoch, bool failed = false) {
  RequestEvent e;
  e.epoch = epoch;
  e.failed = failed;
  e.stages = {{.predicted_s = 1.0, .modelled_s = 0.5, .wall_s = 0.1, .execute_w = 10.0}};
  return e;
}

TEST(RtEpochObserver, CountsEachEpochInOrder) {
  EpochObserver obs;
  EXPECT_FALSE(obs.wants_kernel_timings());
  obs.on_request(answered(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  obs.on_request(answered(1));
  obs.on_request(answered(2));
  obs.on_request(answered(1));        // the retired pipeline's last request
  obs.on_request(answered(2, true));  // failed: runs again, counts then
  const auto epochs = obs.epochs();
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].epoch, 1u);
  EXPECT_EQ(epochs[0].requests, 3u);
  EXPECT_DOUBLE_EQ(epochs[0].modelled_energy_j, 15.0);
  EXPECT_GE(epochs[0].last_s - epochs[0].first_s, 0.005);
  EXPECT_GT(epochs[0].throughput_per_s(), 0.0);
  EXPECT_DOUBLE_EQ(epochs[0].throughput_per_s(), 2.0 / (epochs[0].last_s - epochs[0].first_s));
  EXPECT_EQ(epochs[1].epoch, 2u);
  EXPECT_EQ(epochs[1].requests, 1u);
  EXPECT_DOUBLE_EQ(epochs[1].throughput_per_s(), 0.0);  // one answer spans no time
  EXPECT_LE(epochs[1].last_s, obs.uptime_s());
}

TEST(RtEpochObserver, KeepsTheLatestEpochsOnly) {
  EpochObserver obs;
  for (std::uint64_t e = 1; e <= EpochObserver::kMaxEpochs + 10; ++e) obs.on_request(answered(e));
  obs.on_request(answered(3));  // older than every epoch kept: dropped
  const auto epochs = obs.epochs();
  ASSERT_EQ(epochs.size(), EpochObserver::kMaxEpochs);
  EXPECT_EQ(epochs.front().epoch, 11u);
  EXPECT_EQ(epochs.back().epoch, EpochObserver::kMaxEpochs + 10);
  obs.on_request(answered(EpochObserver::kMaxEpochs + 12));  // a new one pushes the oldest out
  EXPECT_EQ(obs.epochs().front().epoch, 12u);
}

TEST(RtDriftWatch, RecentMeanAgainstThePlannedForWithThresholds) {
  DriftOptions o;
  o.window = 4;
  o.sustain = 5;  // the window keeps max(window, sustain) requests; no signal in 4 in a row
  DriftDetector d(o, Characteristics{.nodes = 1000, .nnz = 10000, .feature_len = 64});
  DriftWatch w = d.watch();
  ASSERT_EQ(w.fields.size(), 5u);
  EXPECT_EQ(w.fields[1].name, "nnz");
  EXPECT_DOUBLE_EQ(w.fields[1].recent, 10000.0);  // no request yet: the baseline
  EXPECT_EQ(w.window_requests, 0);
  for (std::uint64_t i = 0; i < 6; ++i)
    d.observe(Characteristics{.nodes = 1000, .nnz = i < 2 ? 10000 : 20000, .feature_len = 64}, i);
  w = d.watch();
  EXPECT_EQ(w.window_requests, 5);  // requests 1..5: one at 10000, four at 20000
  EXPECT_DOUBLE_EQ(w.fields[1].baseline, 10000.0);
  EXPECT_DOUBLE_EQ(w.fields[1].recent, 18000.0);
  EXPECT_DOUBLE_EQ(w.fields[1].change, 0.8);
  EXPECT_DOUBLE_EQ(w.fields[0].change, 0.0);
  EXPECT_EQ(w.streak, 4);
  EXPECT_EQ(w.streak_field, "nnz");
  EXPECT_DOUBLE_EQ(w.options.threshold, 0.05);
  // Stage times: the first full window sets the planned ratio, the latest sample is the recent one.
  for (int i = 0; i < 4; ++i) d.observe_stage_time(0, 1.0, 2.0);
  d.observe_stage_time(0, 1.0, 2.2);
  w = d.watch();
  ASSERT_EQ(w.stages.size(), 1u);
  EXPECT_DOUBLE_EQ(w.stages[0].planned_ratio, 2.0);
  EXPECT_DOUBLE_EQ(w.stages[0].recent_ratio, 2.2);
  EXPECT_NEAR(w.stages[0].change, 0.1, 1e-12);
}

}  // namespace
}  // namespace dype::rt
