#include "runtime/energy_observer.h"

namespace dype::rt {

void EnergyObserver::on_request(const RequestEvent& e) {
  if (e.failed) return;
  double joules = 0.0;
  for (const StageTime& t : e.stages)
    if (t.modelled_s > 0) joules += t.modelled_s * t.execute_w;
  std::lock_guard lock(mutex_);
  joules_ += joules;
}

double EnergyObserver::modelled_energy_j() const {
  std::lock_guard lock(mutex_);
  return joules_;
}

}  // namespace dype::rt
