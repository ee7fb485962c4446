#pragma once
// ReorderBuffer: answers released in submission order, whatever pipeline (or re-run) produced them,
// and admission: at most max_in_flight requests between reserve() and their release, so a client
// that submits faster than the pipelines answer waits (closed loop).
//
//   rt::ReorderBuffer answers(8);
//   answers.reserve();                                  // blocks while 8 are outstanding
//   std::future<rt::HostTensor> f = answers.add(seq, request, callback);
//   ... later, from any thread, in any order ...
//   answers.complete(seq, std::move(output), nullptr, modelled_end_s);  // releases seq once every
//                                                                       // earlier one is answered
//
// Callbacks run on the completing thread, in order, under the buffer's lock: they must not block
// or submit. Thread-safe.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/model.h"

namespace dype::rt {

using ResponseCallback = std::function<void(std::uint64_t seq, const HostTensor* output, std::exception_ptr error)>;
// The answer for a caller that takes it by callback instead of a future: the output (moved in) or
// the error. Runs like a ResponseCallback (completing thread, in order, under the lock): it must not
// block, submit or throw.
using AnswerCallback = std::function<void(HostTensor output, std::exception_ptr error)>;

class ReorderBuffer {
 public:
  explicit ReorderBuffer(std::size_t max_in_flight) : max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight) {}

  // Takes a slot; blocks while max_in_flight requests are outstanding.
  void reserve();
  // Takes a slot if one is free now; false (nothing taken) while max_in_flight are outstanding.
  bool try_reserve();
  // Gives back a slot that reserve() or try_reserve() took for a request that was not added.
  void unreserve();
  // Registers request `seq` (numbers start at 0 and have no gaps) in a slot reserve() took.
  std::future<HostTensor> add(std::uint64_t seq, std::shared_ptr<const Request> request, ResponseCallback callback);
  // The same, answered through `done` only (no future).
  void add_answered_by(std::uint64_t seq, std::shared_ptr<const Request> request, AnswerCallback done);
  // The request `seq` still waits for its answer; null once answered (or never added).
  std::shared_ptr<const Request> pending(std::uint64_t seq) const;
  // The answer for `seq` (output, or error when set); then releases every answer that is next in
  // order. An answer for a request already answered is ignored (never answered twice).
  // modelled_end_s: when the result reached the host on emulated devices (-1: not modelled).
  void complete(std::uint64_t seq, HostTensor output, std::exception_ptr error, double modelled_end_s);

  // Waits until every added request has been released.
  void wait_all();
  std::size_t in_flight() const;
  // The latest modelled time an answer reached the host (emulated devices; new work starts after it).
  double latest_modelled_end_s() const;

  struct Counters {
    std::uint64_t submitted = 0;
    std::uint64_t completed = 0;
    std::uint64_t failed = 0;
    std::uint64_t cancelled = 0;  // answered with RequestCancelled (counted apart from failed)
  };
  Counters counters() const;

 private:
  struct Entry {
    std::shared_ptr<const Request> request;
    std::promise<HostTensor> promise;
    ResponseCallback callback;
    AnswerCallback done;  // set: the answer goes here, not to `promise`
    bool ready = false;
    HostTensor output;
    std::exception_ptr error;
  };
  void release_ready_locked();

  const std::size_t max_in_flight_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::uint64_t, Entry> entries_;
  std::uint64_t next_release_ = 0;
  std::size_t in_flight_ = 0;
  double latest_end_s_ = 0.0;
  Counters counters_;
};

}  // namespace dype::rt
