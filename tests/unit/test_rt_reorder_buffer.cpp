// ReorderBuffer: answers released in submission order whatever order they complete in, errors
// delivered as such, never answered twice, admission blocks at max_in_flight.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/reorder_buffer.h"

namespace dype::rt {
namespace {

HostTensor value(float v) {
  HostTensor t = HostTensor::zeros(1, 1);
  t.data[0] = v;
  return t;
}

TEST(RtReorderBuffer, ReleasesInSubmissionOrder) {
  ReorderBuffer b(8);
  std::vector<std::uint64_t> order;
  std::vector<std::future<HostTensor>> futs;
  for (std::uint64_t s = 0; s < 5; ++s) {
    b.reserve();
    futs.push_back(b.add(s, nullptr, [&](std::uint64_t seq, const HostTensor* y, std::exception_ptr err) {
      EXPECT_TRUE(y && !err);
      order.push_back(seq);
    }));
  }
  EXPECT_EQ(b.in_flight(), 5u);
  b.complete(3, value(3), nullptr, 30.0);
  b.complete(1, value(1), nullptr, 10.0);
  EXPECT_TRUE(order.empty());  // 0 is not answered yet
  EXPECT_EQ(futs[1].wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  b.complete(0, value(0), nullptr, 5.0);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1}));
  b.complete(2, value(2), nullptr, 20.0);
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  b.complete(4, value(4), nullptr, -1.0);  // not modelled
  EXPECT_EQ(order, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
  for (int s = 0; s < 5; ++s) EXPECT_EQ(futs[static_cast<std::size_t>(s)].get().data[0], static_cast<float>(s));
  EXPECT_EQ(b.in_flight(), 0u);
  EXPECT_DOUBLE_EQ(b.latest_modelled_end_s(), 30.0);
  EXPECT_EQ(b.counters().submitted, 5u);
  EXPECT_EQ(b.counters().completed, 5u);
  EXPECT_EQ(b.counters().failed, 0u);
  b.wait_all();  // nothing outstanding: returns at once
}

TEST(RtReorderBuffer, ErrorsAreAnswersAndNothingIsAnsweredTwice) {
  ReorderBuffer b(4);
  auto req = std::make_shared<const Request>(Request::gnn(nullptr, HostTensor::zeros(1, 1)));
  b.reserve();
  bool called = false;
  auto f0 = b.add(0, req, [&](std::uint64_t, const HostTensor* y, std::exception_ptr err) {
    called = true;
    EXPECT_EQ(y, nullptr);
    EXPECT_TRUE(err);
  });
  b.reserve();
  auto f1 = b.add(1, req, {});
  EXPECT_EQ(b.pending(0), req);
  EXPECT_EQ(b.pending(7), nullptr);  // never added
  b.complete(1, value(1), nullptr, 1.0);
  EXPECT_EQ(b.pending(1), nullptr);  // answered, waiting for 0 to be released
  b.complete(1, value(9), nullptr, 1.0);  // a second answer is ignored
  b.complete(0, {}, std::make_exception_ptr(std::runtime_error("gpu0: ECC error")), -1.0);
  EXPECT_TRUE(called);
  EXPECT_THROW(f0.get(), std::runtime_error);
  EXPECT_EQ(f1.get().data[0], 1.0f);
  b.complete(0, value(0), nullptr, 1.0);  // after release: ignored too
  EXPECT_EQ(b.counters().failed, 1u);
  EXPECT_EQ(b.counters().completed, 1u);
}

TEST(RtReorderBuffer, AdmissionBlocksAtMaxInFlight) {
  ReorderBuffer b(2);
  b.reserve();
  auto f0 = b.add(0, nullptr, {});
  b.reserve();
  auto f1 = b.add(1, nullptr, {});
  std::atomic<bool> admitted{false};
  std::thread third([&] {
    b.reserve();
    admitted = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(admitted.load());
  b.complete(1, value(1), nullptr, -1.0);  // answered but not released: still in flight
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(admitted.load());
  b.complete(0, value(0), nullptr, -1.0);
  third.join();
  EXPECT_TRUE(admitted.load());
  b.add(2, nullptr, {});
  std::thread waiter([&] { b.wait_all(); });
  b.complete(2, value(2), nullptr, -1.0);
  waiter.join();
  EXPECT_EQ(b.in_flight(), 0u);
}

// try_reserve never waits: false at max_in_flight, a slot again once an answer leaves or a slot is
// given back; answers taken by a Completion arrive in order, output moved in, errors as errors.
TEST(RtReorderBuffer, TryReserveAndCompletionAnswers) {
  ReorderBuffer b(2);
  EXPECT_TRUE(b.try_reserve());
  EXPECT_TRUE(b.try_reserve());
  EXPECT_FALSE(b.try_reserve());
  b.unreserve();
  EXPECT_EQ(b.in_flight(), 1u);
  EXPECT_TRUE(b.try_reserve());
  std::vector<float> got;
  int errors = 0;
  auto done = [&](HostTensor y, std::exception_ptr err) {
    if (err) ++errors;
    else got.push_back(y.data.at(0));
  };
  b.add_answered_by(0, nullptr, done);
  b.add_answered_by(1, nullptr, done);
  b.complete(1, HostTensor{}, std::make_exception_ptr(std::runtime_error("failed")), -1.0);
  EXPECT_TRUE(got.empty());
  EXPECT_FALSE(b.try_reserve());
  b.complete(0, value(7), nullptr, -1.0);
  EXPECT_EQ(got, (std::vector<float>{7}));
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(b.in_flight(), 0u);
  EXPECT_EQ(b.counters().completed, 1u);
  EXPECT_EQ(b.counters().failed, 1u);
  EXPECT_TRUE(b.try_reserve());
}

}  // namespace
}  // namespace dype::rt
