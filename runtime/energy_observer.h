#pragma once
// Energy accounting as an observer: the modelled energy of the requests the pipelines answered.
// Per request and stage, the stage's modelled busy time times the execute power of its devices
// (their device models; idle power of unused devices is not included). Requests that failed in
// some stage count only when they run again and succeed. The engine attaches one to every
// pipeline it builds (EngineStats::modelled_energy_j); it works on any pipeline:
//
//   auto energy = std::make_shared<rt::EnergyObserver>();
//   rt::Pipeline p(model, spec, {.observers = {energy.get()}});
//   ... submit, close, join ...
//   double j = energy->modelled_energy_j();
#include <mutex>

#include "runtime/observer.h"

namespace dype::rt {

class EnergyObserver : public Observer {
 public:
  void on_request(const RequestEvent& e) override;
  bool wants_kernel_timings() const override { return false; }
  double modelled_energy_j() const;

 private:
  mutable std::mutex mutex_;
  double joules_ = 0.0;
};

}  // namespace dype::rt
