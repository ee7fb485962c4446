#pragma once
// Admission control shared by the front ends (HTTP, gRPC): a bound on requests admitted at once
// (beyond it: Overloaded -> 429 / RESOURCE_EXHAUSTED) and the shutdown switch (after it:
// Unavailable -> 503 / UNAVAILABLE), with a wait for the admitted ones to finish.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "runtime/daemon/errors.h"
#include "runtime/daemon/metrics.h"

namespace dype::rt::daemon {

class AdmissionControl {
 public:
  AdmissionControl(std::size_t max_queue, Metrics& metrics) : max_queue_(max_queue), metrics_(metrics) {}

  // RAII ticket: admitted on construction (or throws), released on destruction.
  class Ticket {
   public:
    explicit Ticket(AdmissionControl& a) : a_(a) { a_.enter(); }
    ~Ticket() { a_.leave(); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    AdmissionControl& a_;
  };

  bool ready() const {
    std::lock_guard lock(mu_);
    return !draining_;
  }
  void begin_shutdown() {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  // Throws Unavailable once shutting down (for routes that do not take a ticket).
  void check_serving() const {
    if (!ready()) throw Unavailable("server is shutting down");
  }
  bool wait_idle(double timeout_s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return in_flight_ == 0; });
  }
  std::size_t in_flight() const {
    std::lock_guard lock(mu_);
    return in_flight_;
  }

 private:
  void enter() {
    std::lock_guard lock(mu_);
    if (draining_) throw Unavailable("server is shutting down");
    if (in_flight_ >= max_queue_)
      throw Overloaded("queue full: " + std::to_string(in_flight_) + " requests in flight (limit " +
                       std::to_string(max_queue_) + "); retry later");
    ++in_flight_;
    metrics_.set_in_flight(static_cast<std::int64_t>(in_flight_));
  }
  void leave() {
    std::lock_guard lock(mu_);
    --in_flight_;
    metrics_.set_in_flight(static_cast<std::int64_t>(in_flight_));
    cv_.notify_all();
  }

  const std::size_t max_queue_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t in_flight_ = 0;
  bool draining_ = false;
};

}  // namespace dype::rt::daemon
