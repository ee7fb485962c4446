// ReplanController without pipelines: a scripted planner stands in for the scheduler and a
// recording installer for the engine; characteristics and stage times go in, installs and the
// records the observers hear come out. Drift triggers a decision, the hysteresis keeps a plan that
// is not better enough, the rate limit spaces signals, swap policies, no plan, operator inputs and
// their rollback, the planner thread, and records / counts bounded at kMaxRecords.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/error.h"
#include "runtime/planning/replan_controller.h"

namespace dype::rt {
namespace {

// Plans "small" (one stage) below 50,000 nnz and "big" (two stages) from there; scores and
// predictions are set by the test. No devices: the controller compares layouts only.
class ScriptedPlanner : public Planner {
 public:
  double new_score = 1.0;      // the new plan's objective value
  double current_score = 2.0;  // predict_score of the running plan under new characteristics
  bool fail = false;           // no plan exists
  std::optional<std::string> recheck;
  int plans = 0;
  std::string last_mode;
  std::set<std::string> last_excluded;

  static PipelineSpec small() { return {{{0, 1, {}, 0.0}}, "small"}; }
  static PipelineSpec big() { return {{{0, 0, {}, 0.0}, {1, 1, {}, 0.0}}, "big"}; }

  PlannedPipeline plan(const Characteristics& c, const std::string& mode,
                       const std::set<std::string>& excluded) override {
    std::lock_guard lock(mu_);  // the planner thread and an operator's re-plan may plan at once
    ++plans;
    last_mode = mode;
    last_excluded = excluded;
    if (fail) throw std::runtime_error("nothing fits");
    PlannedPipeline p;
    p.spec = c.nnz < 50000 ? small() : big();
    p.mnemonic = p.spec.label;
    p.score = new_score;
    p.cost_source = "scripted";
    return p;
  }
  double predict_period_s(const PipelineSpec& spec, const Characteristics&) override {
    return spec.stages.size() == 1 ? 2.0 : 1.0;
  }
  double predict_score(const PipelineSpec&, const Characteristics&, const std::string&) override {
    return current_score;
  }
  std::optional<std::string> take_recheck() override { return std::exchange(recheck, std::nullopt); }

 private:
  std::mutex mu_;
};

const Characteristics kBase{.nodes = 1000, .nnz = 10000, .feature_len = 64};
const Characteristics kBig{.nodes = 1000, .nnz = 100000, .feature_len = 64};

DriftOptions drift(int sustain, int min_between, double min_gain = 0.05) {
  DriftOptions o;
  o.sustain = sustain;
  o.min_requests_between = min_between;
  o.min_gain = min_gain;
  return o;
}

// The engine's side: every spec it is asked to build, with its epoch; refuses while `refuse`.
struct RecordingInstaller : PlanInstaller {
  std::vector<std::pair<PipelineSpec, std::uint64_t>> installed;
  bool refuse = false;
  void install(PipelineSpec spec, std::uint64_t epoch) override {
    if (refuse) throw std::runtime_error("cannot build");
    installed.emplace_back(std::move(spec), epoch);
  }
};

// Every re-plan record the observers hear.
struct HeardRecords : Observer {
  std::vector<ReplanRecord> records;
  void on_replan(const ReplanRecord& r) override { records.push_back(r); }
};

struct Fixture {
  std::shared_ptr<ScriptedPlanner> planner = std::make_shared<ScriptedPlanner>();
  RecordingInstaller installer;
  std::mutex lock;
  std::shared_ptr<HeardRecords> heard = std::make_shared<HeardRecords>();
  std::shared_ptr<ObserverSet> observers = std::make_shared<ObserverSet>();
  ReplanController ctl;
  std::uint64_t seq = 0;

  explicit Fixture(DriftOptions o = drift(4, 4), bool solve_beside = false)
      : ctl(planner, "perf", o, kBase,
            {.installer = installer,
             .lock = lock,
             .observers = observers,
             .solve_beside = solve_beside}) {
    observers->add(heard);
    std::lock_guard held(lock);
    ctl.install_initial();
    EXPECT_EQ(heard->records.size(), 1u);
    EXPECT_EQ(heard->records.back().cause, "initial");
    EXPECT_TRUE(heard->records.back().swapped);
    EXPECT_EQ(heard->records.back().new_epoch, 1u);
    EXPECT_EQ(installer.installed.size(), 1u);
  }
  // Feeds `n` requests; returns the record of the first decision the observers hear (and the
  // index it came at).
  std::optional<ReplanRecord> feed(const Characteristics& c, int n, std::uint64_t* at = nullptr) {
    for (int i = 0; i < n; ++i) {
      const std::uint64_t s = seq++;
      std::lock_guard held(lock);  // a planner thread lands its plans under it
      const std::size_t before = heard->records.size();
      ctl.on_submit(c, s);
      if (heard->records.size() > before) {
        if (at) *at = s;
        return heard->records[before];
      }
    }
    return std::nullopt;
  }
  ReplanRecord last_heard() const { return heard->records.back(); }
};

TEST(RtReplanController, InitialPlanComesFromThePlanner) {
  Fixture f;
  EXPECT_EQ(f.ctl.epoch(), 1u);
  EXPECT_EQ(f.ctl.label(), "small");
  EXPECT_EQ(f.ctl.spec().stages.size(), 1u);
  EXPECT_EQ(f.planner->last_mode, "perf");
  ASSERT_EQ(f.ctl.records().size(), 1u);
  EXPECT_EQ(f.ctl.records()[0].cost_source, "scripted");
  EXPECT_EQ(f.ctl.counts().at({"initial", true}), 1u);
  EXPECT_EQ(f.ctl.swaps().count, 0u);  // the first plan is not a swap

  // Explicit first pipeline, no planner: drift finds no plan and keeps it.
  Fixture g;
  const ReplanController::Outlet outlet{
      .installer = g.installer, .lock = g.lock, .observers = g.observers, .solve_beside = false};
  ReplanController bare(nullptr, "perf", drift(2, 0), kBase, outlet);
  bare.install_initial(ScriptedPlanner::big());
  EXPECT_EQ(g.last_heard().detail, "explicit pipeline");
  EXPECT_EQ(g.last_heard().new_plan, "big");
  EXPECT_EQ(g.installer.installed.back().first.label, "big");
  bare.on_submit(kBig, 0);
  bare.on_submit(kBig, 1);
  EXPECT_EQ(g.heard->records.size(), 2u);  // the initial plans only: nothing else was decided
  ASSERT_EQ(bare.records().size(), 2u);
  EXPECT_NE(bare.records().back().detail.find("no plan"), std::string::npos) << bare.records().back().detail;
  EXPECT_THROW(ReplanController(nullptr, "perf", {}, kBase, outlet).install_initial(), InputError);
}

TEST(RtReplanController, SustainedDriftTriggersADecision) {
  Fixture f;
  EXPECT_FALSE(f.feed(kBase, 20));  // as planned: nothing
  std::uint64_t at = 0;
  auto d = f.feed(kBig, 10, &at);
  ASSERT_TRUE(d);
  EXPECT_EQ(at, 23u);  // the 4th request of the new phase
  EXPECT_EQ(d->cause, "drift");
  EXPECT_NE(d->detail.find("nnz"), std::string::npos) << d->detail;
  EXPECT_TRUE(d->swapped);
  EXPECT_EQ(d->at_request, 23u);
  EXPECT_EQ(d->old_plan, "small");
  EXPECT_EQ(d->new_plan, "big");
  EXPECT_EQ(d->old_epoch, 1u);
  EXPECT_EQ(d->new_epoch, 2u);
  EXPECT_DOUBLE_EQ(d->predicted_gain, 1.0);  // 2.0 / 1.0 - 1
  // Installed as epoch 2 before the observers heard it; made for the new stream.
  ASSERT_EQ(f.installer.installed.size(), 2u);
  EXPECT_EQ(f.installer.installed.back().first.stages.size(), 2u);
  EXPECT_EQ(f.installer.installed.back().second, 2u);
  EXPECT_EQ(f.ctl.planned_for().nnz, kBig.nnz);
  EXPECT_EQ(f.ctl.epoch(), 2u);
  EXPECT_EQ(f.ctl.label(), "big");
  EXPECT_EQ(f.ctl.records().size(), 2u);
  EXPECT_EQ(f.ctl.counts().at({"drift", true}), 1u);
  EXPECT_EQ(f.ctl.swaps().count, 1u);
  EXPECT_GE(d->pause_s, d->build_s);  // both measured: the pause holds the build
  EXPECT_DOUBLE_EQ(f.ctl.swaps().max_pause_s, d->pause_s);
  EXPECT_DOUBLE_EQ(f.ctl.swaps().total_pause_s, d->pause_s);
  // The new plan is the new baseline: the same stream asks for nothing more.
  EXPECT_FALSE(f.feed(kBig, 40));
}

TEST(RtReplanController, HysteresisKeepsAPlanThatIsNotBetterEnough) {
  Fixture f(drift(4, 4, 0.05));
  f.planner->current_score = 1.03;  // the new plan would be only 3% better
  auto d = f.feed(kBig, 10);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->swapped);
  EXPECT_NEAR(d->predicted_gain, 0.03, 1e-12);
  EXPECT_EQ(f.installer.installed.size(), 1u);  // nothing built
  // Recorded, and heard; the plan stands.
  EXPECT_EQ(f.ctl.records().size(), 2u);
  EXPECT_EQ(f.ctl.counts().at({"drift", false}), 1u);
  EXPECT_EQ(f.ctl.epoch(), 1u);
  EXPECT_EQ(f.ctl.label(), "small");
  // The current plan now stands for these characteristics: no new signal for the same stream.
  const int plans = f.planner->plans;
  EXPECT_FALSE(f.feed(kBig, 40));
  EXPECT_EQ(f.planner->plans, plans);
  // Beyond the margin it swaps.
  f.planner->current_score = 1.5;
  auto back = f.feed(kBase, 10);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->new_plan, "small");
  EXPECT_FALSE(back->swapped);  // same layout as the running plan: nothing to swap
  auto again = f.feed(kBig, 10);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->swapped);
}

TEST(RtReplanController, RateLimitSpacesDecisions) {
  Fixture f(drift(2, 10));
  std::uint64_t first = 0, second = 0;
  // The first plan counts as a signal at request 0: sustained from request 1, decided at 10.
  auto d = f.feed(kBig, 20, &first);
  ASSERT_TRUE(d);
  EXPECT_EQ(first, 10u);
  ASSERT_TRUE(d->swapped);
  // A second sustained move right after: held back until min_requests_between have passed.
  Characteristics bigger = kBig;
  bigger.nnz = 400000;
  auto d2 = f.feed(bigger, 30, &second);
  ASSERT_TRUE(d2);
  EXPECT_EQ(second, first + 10);  // sustained after 2 requests, held back to 10
  EXPECT_EQ(d2->cause, "drift");
}

TEST(RtReplanController, StageTimesAgainstThePlanTriggerADecision) {
  DriftOptions o = drift(3, 0);
  o.window = 4;
  Fixture f(o);
  auto done = [](std::uint64_t seq, double measured_s, bool failed = false) {
    RequestEvent e;
    e.seq = seq;
    e.failed = failed;
    e.stages.push_back({.predicted_s = 1.0, .modelled_s = measured_s, .wall_s = 0.0, .execute_w = 0.0});
    return e;
  };
  std::uint64_t seq = 0;
  for (; seq < 4; ++seq) f.ctl.on_request_done(done(seq, 1.1));  // the planned ratio: bias, not drift
  for (; seq < 10; ++seq) f.ctl.on_request_done(done(seq, 3.0, true));  // failed requests: ignored
  f.seq = seq;
  EXPECT_FALSE(f.feed(kBase, 1));
  for (int i = 0; i < 3; ++i, ++seq) f.ctl.on_request_done(done(seq, 3.0));
  f.planner->current_score = 1.5;
  auto d = f.feed(kBase, 1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cause, "drift");
  EXPECT_NE(d->detail.find("stage 0"), std::string::npos) << d->detail;
  EXPECT_FALSE(d->swapped);  // same characteristics, same plan

  // Requests submitted before the plan was (re)confirmed ran under the old one: their stage times
  // neither set the new baseline nor signal.
  const std::uint64_t rebased_at = d->at_request;  // the re-plan rebased the detector there
  for (int i = 0; i < 20; ++i) f.ctl.on_request_done(done(rebased_at - 1, 9.0));
  EXPECT_FALSE(f.feed(kBase, 1));
  for (int i = 0; i < 4; ++i) f.ctl.on_request_done(done(rebased_at + 1, 1.0));
  for (int i = 0; i < 3; ++i) f.ctl.on_request_done(done(rebased_at + 1, 1.05));  // within 25%
  EXPECT_FALSE(f.feed(kBase, 1));
}

TEST(RtReplanController, StageTimesReachTheDetectorThroughItsObserver) {
  // What a pipeline tells stage_times() counts at the next request, as on_request_done would.
  DriftOptions o = drift(3, 0);
  o.window = 4;
  Fixture f(o);
  Observer& pipelines_tell = f.ctl.stage_times();
  auto done = [](std::uint64_t seq, double measured_s) {
    RequestEvent e;
    e.seq = seq;
    e.stages.push_back(
        {.predicted_s = 1.0, .modelled_s = measured_s, .wall_s = 0.0, .execute_w = 0.0});
    return e;
  };
  std::uint64_t seq = 0;
  for (; seq < 4; ++seq) pipelines_tell.on_request(done(seq, 1.1));
  f.seq = seq;
  EXPECT_FALSE(f.feed(kBase, 1));
  seq = f.seq;
  for (int i = 0; i < 3; ++i, ++seq) pipelines_tell.on_request(done(seq, 3.0));
  f.planner->current_score = 1.5;
  auto d = f.feed(kBase, 1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cause, "drift");
  EXPECT_NE(d->detail.find("stage 0"), std::string::npos) << d->detail;

  // A controller that re-plans beside the pipeline reads them at on_submit too, and solves on
  // its planner thread.
  Fixture g(o, /*solve_beside=*/true);
  for (seq = 0; seq < 4; ++seq) g.ctl.stage_times().on_request(done(seq, 1.1));
  EXPECT_FALSE(g.feed(kBase, 1));
  seq = g.seq;
  for (int i = 0; i < 3; ++i, ++seq) g.ctl.stage_times().on_request(done(seq, 3.0));
  g.feed(kBase, 1);
  g.ctl.wait_replans();
  EXPECT_EQ(g.last_heard().cause, "drift");
  EXPECT_NE(g.last_heard().detail.find("stage 0"), std::string::npos) << g.last_heard().detail;
}

TEST(RtReplanController, APlanSolvedBesideLandsUnlessItsInputsChanged) {
  Fixture f(drift(4, 4), /*solve_beside=*/true);
  f.feed(kBig, 10);  // the 4th signals; the solve lands on the planner thread
  f.ctl.wait_replans();
  {
    std::lock_guard held(f.lock);
    EXPECT_EQ(f.ctl.epoch(), 2u);
    EXPECT_EQ(f.last_heard().cause, "drift");
    EXPECT_TRUE(f.last_heard().swapped);
    EXPECT_EQ(f.installer.installed.back().second, 2u);
    // While a solve is out, further signals are dropped; one that finishes after the mode changed
    // is recorded as superseded, not installed.
    for (int i = 0; i < 10; ++i) f.ctl.on_submit(kBase, f.seq++);
    f.ctl.set_mode("energy");
  }
  f.ctl.wait_replans();
  std::lock_guard held(f.lock);
  EXPECT_EQ(f.ctl.epoch(), 2u);
  EXPECT_EQ(f.last_heard().cause, "mode");
  EXPECT_EQ(f.ctl.records().back().cause, "drift");
  EXPECT_NE(f.ctl.records().back().detail.find("superseded"), std::string::npos)
      << f.ctl.records().back().detail;
  EXPECT_EQ(f.ctl.counts().at({"drift", false}), 1u);
}

TEST(RtReplanController, PlannerRecheckAsksForAModelReplan) {
  Fixture f;
  f.planner->recheck = "gpu spmm model refined";
  f.planner->current_score = 1.5;
  auto d = f.feed(kBase, 1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->cause, "model");
  EXPECT_EQ(d->detail, "gpu spmm model refined");
  EXPECT_FALSE(d->swapped);         // same layout
  EXPECT_FALSE(f.feed(kBase, 5));   // taken once
}

TEST(RtReplanController, SwapPoliciesAndNoPlan) {
  Fixture f;
  // Same layout: if_different keeps it, always rebuilds (a fault).
  f.ctl.replan("recheck", "same", SwapPolicy::if_different);
  EXPECT_EQ(f.last_heard().cause, "recheck");
  EXPECT_FALSE(f.last_heard().swapped);
  f.ctl.replan("fault", "gpu1 failed", SwapPolicy::always);
  EXPECT_TRUE(f.last_heard().swapped);
  EXPECT_EQ(f.last_heard().new_epoch, 2u);
  EXPECT_EQ(f.installer.installed.size(), 2u);
  // No plan: operator re-plans throw (recorded), drift keeps the current plan.
  f.planner->fail = true;
  EXPECT_THROW(f.ctl.replan("mode", "mode perf -> energy", SwapPolicy::if_different), std::runtime_error);
  EXPECT_NE(f.ctl.records().back().detail.find("(no plan: nothing fits)"), std::string::npos);
  EXPECT_EQ(f.ctl.counts().at({"mode", false}), 1u);
  EXPECT_FALSE(f.feed(kBig, 10));
  EXPECT_EQ(f.ctl.records().back().cause, "drift");
  EXPECT_FALSE(f.ctl.records().back().swapped);
  // swap_to: whatever the gain, predicted from the planner's periods.
  f.ctl.swap_to(ScriptedPlanner::big(), "2x1", "manual", "");
  const ReplanRecord d = f.last_heard();
  EXPECT_TRUE(d.swapped);
  EXPECT_EQ(d.detail, "swap_to big");
  EXPECT_EQ(d.new_plan, "2x1");
  EXPECT_DOUBLE_EQ(d.predicted_gain, 1.0);
}

TEST(RtReplanController, ModeDrainedAndFailedDevicesReachThePlanner) {
  Fixture f;
  f.ctl.set_mode("energy");
  EXPECT_EQ(f.planner->last_mode, "energy");
  EXPECT_EQ(f.last_heard().detail, "mode perf -> energy");
  EXPECT_TRUE(f.ctl.drain("gpu1", "drain", ""));
  EXPECT_EQ(f.last_heard().detail, "operator drained gpu1");
  EXPECT_FALSE(f.ctl.drain("gpu1", "drain", ""));  // drained already: nothing re-planned
  f.ctl.fail_over({"fpga0"}, "fpga0 failed");
  EXPECT_EQ(f.last_heard().cause, "fault");
  EXPECT_EQ(f.planner->last_excluded, (std::set<std::string>{"fpga0", "gpu1"}));
  EXPECT_TRUE(f.ctl.undrain("gpu1", "undrain", ""));
  EXPECT_FALSE(f.ctl.undrain("gpu1", "undrain", ""));
  EXPECT_EQ(f.planner->last_excluded, std::set<std::string>{"fpga0"});
  EXPECT_TRUE(f.ctl.failed("fpga0"));
  EXPECT_FALSE(f.ctl.failed("gpu1"));
  const std::size_t heard = f.heard->records.size();
  EXPECT_FALSE(f.ctl.fail_devices({"fpga0"}, "host b lost"));  // failed already
  EXPECT_EQ(f.heard->records.size(), heard);
  EXPECT_TRUE(f.ctl.fail_devices({"fpga0", "fpga1"}, "host b lost"));
  EXPECT_EQ(f.last_heard().cause, "host lost");
  EXPECT_EQ(f.planner->last_excluded, (std::set<std::string>{"fpga0", "fpga1"}));
  EXPECT_TRUE(f.ctl.restore_devices({"fpga0", "fpga1"}, "host b back"));
  EXPECT_EQ(f.last_heard().cause, "rejoin");
  EXPECT_TRUE(f.planner->last_excluded.empty());
  EXPECT_FALSE(f.ctl.restore_devices({"fpga0"}, ""));
  f.ctl.restore(ScriptedPlanner::small(), "1x1", {"gpu0"}, "undo");
  EXPECT_EQ(f.ctl.drained(), std::set<std::string>{"gpu0"});
  EXPECT_EQ(f.last_heard().cause, "rollback");
  EXPECT_EQ(f.ctl.label(), "1x1");
}

TEST(RtReplanController, AChangeWithoutAPlanOrABuildChangesNothing) {
  Fixture f;
  // No plan: the operator's change is put back.
  f.planner->fail = true;
  EXPECT_THROW(f.ctl.set_mode("energy"), std::runtime_error);
  EXPECT_EQ(f.ctl.mode(), "perf");
  EXPECT_THROW(f.ctl.drain("gpu1", "drain", ""), std::runtime_error);
  EXPECT_TRUE(f.ctl.drained().empty());
  f.planner->fail = false;
  ASSERT_TRUE(f.ctl.drain("gpu1", "drain", ""));
  f.planner->fail = true;
  EXPECT_THROW(f.ctl.undrain("gpu1", "undrain", ""), std::runtime_error);
  EXPECT_EQ(f.ctl.drained(), std::set<std::string>{"gpu1"});
  // The engine cannot build the plan: it throws to an operator, drift keeps the current plan.
  f.planner->fail = false;
  f.installer.refuse = true;
  EXPECT_THROW(f.ctl.replan("fault", "gpu0 failed", SwapPolicy::always), std::runtime_error);
  EXPECT_FALSE(f.feed(kBig, 10));
  EXPECT_EQ(f.ctl.epoch(), 1u);
  EXPECT_EQ(f.ctl.label(), "small");
  EXPECT_EQ(f.ctl.swaps().count, 0u);
}

TEST(RtReplanController, RecordsBoundedAtMaxRecordsCountsKeepEverything) {
  Fixture f;
  const std::size_t extra = ReplanController::kMaxRecords + 100;
  for (std::size_t i = 0; i < extra; ++i)
    f.ctl.replan("recheck", "same characteristics", SwapPolicy::if_different);
  EXPECT_EQ(ReplanController::kMaxRecords, 4096u);
  EXPECT_EQ(f.ctl.records().size(), ReplanController::kMaxRecords);
  EXPECT_EQ(f.ctl.records().front().cause, "recheck");  // the initial record aged out
  EXPECT_EQ(f.ctl.counts().at({"recheck", false}), extra);
  EXPECT_EQ(f.ctl.counts().at({"initial", true}), 1u);
}

}  // namespace
}  // namespace dype::rt
