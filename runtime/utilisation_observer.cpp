#include "runtime/utilisation_observer.h"

#include <algorithm>
#include <string_view>

namespace dype::rt {

void UtilisationObserver::on_stage(const StageEvent& e) {
  if (e.failed) return;
  const double wall = std::max(0.0, e.wall_end_s - e.wall_start_s);
  const double modelled = e.modelled_start_s >= 0.0 ? std::max(0.0, e.modelled_end_s - e.modelled_start_s) : 0.0;
  std::lock_guard lock(mu_);
  if (e.modelled_start_s >= 0.0) {
    if (modelled_first_s_ < 0.0 || e.modelled_start_s < modelled_first_s_) modelled_first_s_ = e.modelled_start_s;
    modelled_last_s_ = std::max(modelled_last_s_, e.modelled_end_s);
  }
  std::string_view rest = e.devices;  // "gpu0+gpu1"
  while (!rest.empty()) {
    const auto plus = rest.find('+');
    const std::string_view name = rest.substr(0, plus);
    if (!name.empty()) {
      DeviceBusy& b = busy_[std::string(name)];
      b.measured_s += wall;
      b.modelled_s += modelled;
      ++b.passes;
    }
    if (plus == std::string_view::npos) break;
    rest.remove_prefix(plus + 1);
  }
}

std::map<std::string, DeviceBusy> UtilisationObserver::busy() const {
  std::lock_guard lock(mu_);
  return busy_;
}

double UtilisationObserver::modelled_span_s() const {
  std::lock_guard lock(mu_);
  return modelled_first_s_ < 0.0 ? 0.0 : std::max(0.0, modelled_last_s_ - modelled_first_s_);
}

double UtilisationObserver::uptime_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace dype::rt
