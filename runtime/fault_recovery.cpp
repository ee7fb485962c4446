#include "runtime/fault_recovery.h"

#include <algorithm>
#include <functional>

#include "hw/device.h"

namespace dype::rt {

namespace {

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Thrown and caught rather than std::make_exception_ptr(DeviceError(...)): that copies a temporary
// whose message string shares its (libstdc++ reference-counted) buffer with the stored error, and
// the temporary's destruction on this thread while a client reads the message is ordered only by
// an atomic inside libstdc++, which ThreadSanitizer cannot see. Here no second copy exists.
std::exception_ptr device_error(const std::string& device, const std::string& problem) {
  try {
    throw hw::DeviceError(device, problem);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

FaultRecovery::FaultRecovery(int max_retries, ReorderBuffer& answers, RerunFn rerun)
    : max_retries_(max_retries), answers_(answers), rerun_(std::move(rerun)) {
  thread_ = std::thread([this] { loop(); });
}

FaultRecovery::~FaultRecovery() { stop(); }

void FaultRecovery::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Job FaultRecovery::job(std::uint64_t seq, std::shared_ptr<const Request> request) {
  Job job;
  job.seq = seq;
  job.request = std::move(request);
  job.not_before_s = answers_.latest_modelled_end_s();
  job.done = std::bind_front(&FaultRecovery::on_complete, this);
  return job;
}

void FaultRecovery::on_complete(Completion&& c) {
  if (c.error && !c.failed_device.empty() && take_retry(c.seq)) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(c));
    }
    cv_.notify_one();
    return;
  }
  forget(c.seq);
  answers_.complete(c.seq, std::move(c.output), c.error, c.modelled_end_s);
}

bool FaultRecovery::take_retry(std::uint64_t seq) {
  if (!answers_.pending(seq)) return false;
  std::lock_guard lock(mutex_);
  int& n = retries_[seq];
  if (n >= max_retries_) return false;
  ++n;
  ++reruns_;
  return true;
}

void FaultRecovery::forget(std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  retries_.erase(seq);
}

void FaultRecovery::loop() {
  for (;;) {
    Completion c;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      c = std::move(queue_.front());
      queue_.pop_front();
    }
    recover(c);
  }
}

void FaultRecovery::recover(Completion& c) {
  Failed f;
  f.seq = c.seq;
  f.request = answers_.pending(c.seq);
  f.device = c.failed_device;
  {
    std::lock_guard lock(mutex_);
    if (std::find(failed_devices_.begin(), failed_devices_.end(), f.device) == failed_devices_.end()) {
      failed_devices_.push_back(f.device);
      f.first_failure = true;
    }
  }
  if (f.first_failure)
    f.detail = "device " + f.device + " failed (" + message_of(c.error) +
               "); re-planning without it and re-running in-flight requests";
  const Rerun r = rerun_(f);
  if (r.what == Rerun::submitted) return;
  forget(c.seq);
  if (r.what == Rerun::no_plan)
    answers_.complete(c.seq, {}, device_error(f.device, "failed and no plan is left without it: " + r.why), -1.0);
  else if (r.what == Rerun::on_failed_device)
    answers_.complete(c.seq, {}, device_error(f.device, "failed; no pipeline without it"), -1.0);
}

std::uint64_t FaultRecovery::reruns() const {
  std::lock_guard lock(mutex_);
  return reruns_;
}

void FaultRecovery::forget_failed(const std::string& device) {
  std::lock_guard lock(mutex_);
  std::erase(failed_devices_, device);
}

std::vector<std::string> FaultRecovery::failed_devices() const {
  std::lock_guard lock(mutex_);
  return failed_devices_;
}

}  // namespace dype::rt
