#pragma once
// FaultRecovery: what happens to a request a device failed under. A DeviceError marks the device
// failed: the engine re-plans without it (once per device) and the request runs again on the new
// pipeline, up to max_retries times; when no plan is left, or retries run out, the request is
// answered with an error naming the device. Every other completion goes straight to the answers.
//
// Pipelines call on_complete from their threads (it is every Job's `done`); re-runs happen on the
// recovery thread this object owns, which asks the engine through one callback (run under the
// engine's submission lock, so no swap cuts in between the re-plan and the re-submission):
//
//   rt::FaultRecovery recovery(3, answers, [&](const rt::FaultRecovery::Failed& f) {
//     ... if f.first_failure: leave f.device out, re-plan (detail f.detail); re-submit f.request ...
//     return rt::FaultRecovery::Rerun{rt::FaultRecovery::Rerun::submitted};
//   });
//   pipeline.submit(recovery.job(seq, request));  // completes into recovery.on_complete
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pipeline.h"
#include "runtime/reorder_buffer.h"

namespace dype::rt {

class FaultRecovery {
 public:
  // One failed request to run again.
  struct Failed {
    std::uint64_t seq = 0;
    std::shared_ptr<const Request> request;  // null when it was answered meanwhile
    std::string device;                      // the device the DeviceError named
    bool first_failure = false;              // the device was not known failed: re-plan without it
    std::string detail;                      // for the re-plan record, when first_failure
  };
  // What the engine did with it.
  struct Rerun {
    enum What { submitted, no_plan, on_failed_device, not_pending } what = submitted;
    std::string why;  // no_plan: the planner's reason
  };
  using RerunFn = std::function<Rerun(const Failed&)>;

  FaultRecovery(int max_retries, ReorderBuffer& answers, RerunFn rerun);
  ~FaultRecovery();
  FaultRecovery(const FaultRecovery&) = delete;
  FaultRecovery& operator=(const FaultRecovery&) = delete;

  // Request `seq` as a pipeline's job: it starts no earlier than the latest answer's modelled
  // end, and its completion comes back here (on_complete).
  Job job(std::uint64_t seq, std::shared_ptr<const Request> request);
  // A pipeline finished a request (any thread).
  void on_complete(Completion&& c);
  // Finishes the re-runs queued so far and ends the recovery thread.
  void stop();

  std::uint64_t reruns() const;
  std::vector<std::string> failed_devices() const;  // in the order they failed
  // `device` works again (its host came back): a later failure of it re-plans again.
  void forget_failed(const std::string& device);

 private:
  bool take_retry(std::uint64_t seq);
  void forget(std::uint64_t seq);
  void loop();
  void recover(Completion& c);

  const int max_retries_;
  ReorderBuffer& answers_;
  RerunFn rerun_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Completion> queue_;
  std::map<std::uint64_t, int> retries_;  // requests re-run at least once and not answered yet
  std::uint64_t reruns_ = 0;
  std::vector<std::string> failed_devices_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dype::rt
