#pragma once
// Power states of a device, as the DyPe cost model uses them (paper Table II: "static" is measured
// at complete idle, "dynamic" is added while a kernel runs). Transfer power is drawn while the
// device's link moves data. Watts.
#include <map>
#include <optional>

#include "common/op.h"

namespace dype::hw {

struct PowerStates {
  double idle_w = 0.0;      // static power, drawn always
  double execute_w = 0.0;   // total while a kernel runs (static + dynamic)
  double transfer_w = 0.0;  // total while a copy runs
  // Per-op total execute power where it differs (U280: SpMM 74.5 W, window attention 69.7 W).
  std::map<kernels::OpKind, double> execute_w_by_op;

  double execute_w_for(kernels::OpKind op) const {
    auto it = execute_w_by_op.find(op);
    return it != execute_w_by_op.end() ? it->second : execute_w;
  }
};

// Energy a device used over a span of its timeline, split by state. Joules.
struct EnergyReport {
  double idle_j = 0.0;
  double execute_j = 0.0;
  double transfer_j = 0.0;
  double total_j() const { return idle_j + execute_j + transfer_j; }
};

}  // namespace dype::hw
