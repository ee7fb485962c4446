#pragma once
// How busy each device has been: every stage pass adds its time to each of the stage's devices,
// measured (the stage's wall time on the host: kernels, copies and launch overhead) and modelled
// (the emulated devices' virtual-clock time, when the stage has one). Shared by every engine of a
// daemon, so a device two models use is counted once per use. Utilisation is busy time over the
// time it was taken on the same clock: measured over the wall time since the observer started,
// modelled over the span of the emulated clocks seen (virtual time runs at its own pace); /metrics
// exports both (dype_device_busy_seconds_total and dype_device_utilization).
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "runtime/observer.h"

namespace dype::rt {

struct DeviceBusy {
  double measured_s = 0.0;
  double modelled_s = 0.0;
  std::uint64_t passes = 0;  // stage passes that used the device
};

class UtilisationObserver : public Observer {
 public:
  UtilisationObserver() : start_(std::chrono::steady_clock::now()) {}
  void on_stage(const StageEvent& e) override;
  bool wants_kernel_timings() const override { return false; }

  std::map<std::string, DeviceBusy> busy() const;  // by device name
  double uptime_s() const;
  // The span of virtual time the modelled stage times fall in (0 before any).
  double modelled_span_s() const;

 private:
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::map<std::string, DeviceBusy> busy_;
  double modelled_first_s_ = -1.0, modelled_last_s_ = -1.0;
};

}  // namespace dype::rt
