// FaultRecovery without pipelines: a DeviceError re-plans once per device and re-runs the request
// up to max_retries times; no plan left, or a pipeline still on a failed device, answers with an
// error naming the device; every other completion is answered as it is.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "hw/device.h"
#include "runtime/fault_recovery.h"

namespace dype::rt {
namespace {

Completion failure(std::uint64_t seq, const std::string& device, const std::string& problem) {
  Completion c;
  c.seq = seq;
  c.error = std::make_exception_ptr(hw::DeviceError(device, problem));
  c.failed_device = device;
  return c;
}

Completion success(std::uint64_t seq, float v) {
  Completion c;
  c.seq = seq;
  c.output = HostTensor::zeros(1, 1);
  c.output.data[0] = v;
  return c;
}

// The engine's side: records what recovery asked for and answers with `outcome`.
struct ScriptedEngine {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<FaultRecovery::Failed> calls;
  FaultRecovery::Rerun outcome{FaultRecovery::Rerun::submitted, ""};

  FaultRecovery::RerunFn fn() {
    return [this](const FaultRecovery::Failed& f) {
      std::lock_guard lock(mu);
      calls.push_back(f);
      cv.notify_all();
      return outcome;
    };
  }
  FaultRecovery::Failed wait_call(std::size_t n) {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls.size() >= n; }));
    return calls.size() >= n ? calls[n - 1] : FaultRecovery::Failed{};
  }
};

struct Fixture {
  ReorderBuffer answers{8};
  ScriptedEngine engine;
  std::shared_ptr<const Request> request =
      std::make_shared<const Request>(Request::gnn(nullptr, HostTensor::zeros(1, 1)));
  std::vector<std::future<HostTensor>> futures;

  void submit(int n) {
    for (int i = 0; i < n; ++i) {
      answers.reserve();
      futures.push_back(answers.add(futures.size(), request, {}));
    }
  }
};

TEST(RtFaultRecovery, DeviceErrorReplansOnceAndReruns) {
  Fixture f;
  f.submit(2);
  FaultRecovery rec(3, f.answers, f.engine.fn());
  rec.on_complete(failure(0, "gpu1", "ECC error"));
  const FaultRecovery::Failed first = f.engine.wait_call(1);
  EXPECT_EQ(first.seq, 0u);
  EXPECT_EQ(first.device, "gpu1");
  EXPECT_TRUE(first.first_failure);
  EXPECT_EQ(first.request, f.request);
  EXPECT_NE(first.detail.find("device gpu1 failed"), std::string::npos) << first.detail;
  EXPECT_NE(first.detail.find("ECC error"), std::string::npos) << first.detail;
  // The same device again: known failed, re-run without another re-plan.
  rec.on_complete(failure(1, "gpu1", "ECC error"));
  const FaultRecovery::Failed second = f.engine.wait_call(2);
  EXPECT_EQ(second.seq, 1u);
  EXPECT_FALSE(second.first_failure);
  // The re-runs succeed: answered in order.
  rec.on_complete(success(1, 1.0f));
  rec.on_complete(success(0, 0.5f));
  EXPECT_EQ(f.futures[0].get().data[0], 0.5f);
  EXPECT_EQ(f.futures[1].get().data[0], 1.0f);
  rec.stop();
  EXPECT_EQ(rec.reruns(), 2u);
  EXPECT_EQ(rec.failed_devices(), std::vector<std::string>{"gpu1"});
}

TEST(RtFaultRecovery, RetriesRunOutAndTheErrorIsTheAnswer) {
  Fixture f;
  f.submit(1);
  FaultRecovery rec(1, f.answers, f.engine.fn());
  rec.on_complete(failure(0, "gpu0", "link down"));
  f.engine.wait_call(1);
  rec.on_complete(failure(0, "gpu0", "link down"));  // the re-run failed too: no retry left
  try {
    f.futures[0].get();
    FAIL() << "expected a DeviceError";
  } catch (const hw::DeviceError& e) {
    EXPECT_EQ(e.device(), "gpu0");
    EXPECT_NE(std::string(e.what()).find("link down"), std::string::npos) << e.what();
  }
  rec.stop();
  EXPECT_EQ(rec.reruns(), 1u);
  EXPECT_EQ(f.engine.calls.size(), 1u);
}

TEST(RtFaultRecovery, NoPlanOrNoPipelineWithoutTheDeviceNamesIt) {
  Fixture f;
  f.submit(2);
  f.engine.outcome = {FaultRecovery::Rerun::no_plan, "planner: no feasible plan"};
  FaultRecovery rec(3, f.answers, f.engine.fn());
  rec.on_complete(failure(0, "gpu0", "ECC error"));
  try {
    f.futures[0].get();
    FAIL() << "expected a DeviceError";
  } catch (const hw::DeviceError& e) {
    EXPECT_EQ(e.device(), "gpu0");
    EXPECT_NE(std::string(e.what()).find("no plan is left without it: planner: no feasible plan"), std::string::npos)
        << e.what();
  }
  {
    std::lock_guard lock(f.engine.mu);
    f.engine.outcome = {FaultRecovery::Rerun::on_failed_device, ""};
  }
  rec.on_complete(failure(1, "gpu0", "ECC error"));
  try {
    f.futures[1].get();
    FAIL() << "expected a DeviceError";
  } catch (const hw::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu0: failed; no pipeline without it"), std::string::npos) << e.what();
  }
}

TEST(RtFaultRecovery, OtherCompletionsAreAnsweredAsTheyAre) {
  Fixture f;
  f.submit(2);
  FaultRecovery rec(3, f.answers, f.engine.fn());
  Completion bad;
  bad.seq = 0;
  bad.error = std::make_exception_ptr(std::runtime_error("bad input"));  // no device named
  rec.on_complete(std::move(bad));
  rec.on_complete(success(1, 2.0f));
  EXPECT_THROW(f.futures[0].get(), std::runtime_error);
  EXPECT_EQ(f.futures[1].get().data[0], 2.0f);
  rec.stop();
  EXPECT_TRUE(f.engine.calls.empty());
  EXPECT_EQ(rec.reruns(), 0u);
}

}  // namespace
}  // namespace dype::rt
