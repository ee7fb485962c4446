#pragma once
// Throughput under each plan epoch, as an observer: every answered request counts toward the epoch
// of the pipeline that ran it, with when it finished (steady clock, measured) and its modelled
// energy. What an operator compares across re-plans (the daemon's status page); the latest
// kMaxEpochs epochs are kept, so a daemon re-planning for weeks does not grow without bound.
//
//   auto epochs = std::make_shared<rt::EpochObserver>();
//   engine.add_observer(epochs);
//   ... serve ...
//   for (const rt::EpochThroughput& e : epochs->epochs()) std::cout << e.epoch << " " << e.throughput_per_s();
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "runtime/observer.h"

namespace dype::rt {

struct EpochThroughput {
  std::uint64_t epoch = 0;
  std::uint64_t requests = 0;  // answered under this epoch
  double first_s = 0.0;        // measured: the first and latest completions, seconds since the
  double last_s = 0.0;         // observer started
  double modelled_energy_j = 0.0;
  // Completions per second between the first and the latest (0 with fewer than two).
  double throughput_per_s() const {
    return requests > 1 && last_s > first_s ? static_cast<double>(requests - 1) / (last_s - first_s) : 0.0;
  }
};

class EpochObserver : public Observer {
 public:
  static constexpr std::size_t kMaxEpochs = 256;

  EpochObserver() : start_(std::chrono::steady_clock::now()) {}
  void on_request(const RequestEvent& e) override;
  bool wants_kernel_timings() const override { return false; }

  std::vector<EpochThroughput> epochs() const;  // oldest first
  double uptime_s() const;                      // the clock the times above are on

 private:
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::deque<EpochThroughput> epochs_;
};

}  // namespace dype::rt
