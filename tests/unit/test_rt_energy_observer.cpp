// EnergyObserver: per answered request, each stage's modelled busy time times its devices'
// execute power; stages without a modelled time and failed requests count nothing.
#include <gtest/gtest.h>

#include "runtime/energy_observer.h"

namespace dype::rt {
namespace {

RequestEvent event(bool failed) {
  RequestEvent e;
  e.failed = failed;
  e.stages = {{.predicted_s = 1.0, .modelled_s = 2.0, .wall_s = 0.1, .execute_w = 100.0},
              {.predicted_s = 1.0, .modelled_s = -1.0, .wall_s = 0.1, .execute_w = 50.0},  // not modelled
              {.predicted_s = 1.0, .modelled_s = 0.5, .wall_s = 0.1, .execute_w = 10.0}};
  return e;
}

TEST(RtEnergyObserver, ModelledBusyTimeTimesExecutePower) {
  EnergyObserver energy;
  EXPECT_FALSE(energy.wants_kernel_timings());
  EXPECT_DOUBLE_EQ(energy.modelled_energy_j(), 0.0);
  energy.on_request(event(false));
  EXPECT_DOUBLE_EQ(energy.modelled_energy_j(), 205.0);
  energy.on_request(event(true));  // failed: it runs again, and counts then
  EXPECT_DOUBLE_EQ(energy.modelled_energy_j(), 205.0);
  energy.on_request(event(false));
  EXPECT_DOUBLE_EQ(energy.modelled_energy_j(), 410.0);
}

}  // namespace
}  // namespace dype::rt
