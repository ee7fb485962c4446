#include "runtime/epoch_observer.h"

#include <algorithm>

namespace dype::rt {

void EpochObserver::on_request(const RequestEvent& e) {
  if (e.failed) return;
  double joules = 0.0;
  for (const StageTime& t : e.stages)
    if (t.modelled_s > 0) joules += t.modelled_s * t.execute_w;
  const double now = uptime_s();
  std::lock_guard lock(mu_);
  // Kept in epoch order; a request of a retired pipeline may finish after the next one's first.
  auto it = std::lower_bound(epochs_.begin(), epochs_.end(), e.epoch,
                             [](const EpochThroughput& x, std::uint64_t epoch) { return x.epoch < epoch; });
  if (it == epochs_.end() || it->epoch != e.epoch) {
    if (it == epochs_.begin() && epochs_.size() >= kMaxEpochs) return;  // older than every one kept
    it = epochs_.insert(it, EpochThroughput{.epoch = e.epoch, .first_s = now});
    if (epochs_.size() > kMaxEpochs) {
      epochs_.pop_front();
      it = std::lower_bound(epochs_.begin(), epochs_.end(), e.epoch,
                            [](const EpochThroughput& x, std::uint64_t epoch) { return x.epoch < epoch; });
    }
  }
  ++it->requests;
  it->last_s = std::max(it->last_s, now);
  it->modelled_energy_j += joules;
}

std::vector<EpochThroughput> EpochObserver::epochs() const {
  std::lock_guard lock(mu_);
  return {epochs_.begin(), epochs_.end()};
}

double EpochObserver::uptime_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace dype::rt
