#pragma once
// A cost model that asks its base for each hand-off once. solve_shapes() builds the flat tables
// and every recurrent shape's folded tables over one of these: a folded hand-off (and the
// hand-off from the last stage back to the first) is a sum of the flat chain's hand-offs at the
// rounds' boundaries, which the flat tables already asked for. The runtime cost model works out
// a route per hand-off (runtime/handoff_route.h), the costliest part of building the tables.
//
//   const TransferMemo memo(model, system);
//   const CostTables flat(system, memo);                        // asks `model`
//   const CostTables folded(system, FoldedCostModel(memo, s));  // answered from memory
//
// Every answer is the base's own (the same numbers, only asked once), so tables built over the
// memo equal those built over the base. Not thread-safe (a cache behind const calls).
#include <vector>

#include "scheduler/cost_model.h"

namespace dype::sched::detail {

class TransferMemo final : public CostModel {
 public:
  // `system`: the kinds and counts the groups asked about come from (a group of more devices than
  // its kind has is passed through uncached).
  TransferMemo(const CostModel& base, const SystemSpec& system);

  int num_kernels() const override { return base_.num_kernels(); }
  double compute_time_s(int first, int last, DeviceGroup g) const override { return base_.compute_time_s(first, last, g); }
  double output_bytes(int k) const override { return base_.output_bytes(k); }
  double transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const override {
    return base_.transfer_time_s(k, from, to);
  }
  double transfer_out_s(int k, DeviceGroup from, DeviceGroup to) const override { return sides(k, from, to).out_s; }
  double transfer_in_s(int k, DeviceGroup from, DeviceGroup to) const override { return sides(k, from, to).in_s; }
  Sides transfer_sides(int k, DeviceGroup from, DeviceGroup to) const override { return sides(k, from, to); }
  double host_input_s(DeviceGroup g) const override { return base_.host_input_s(g); }
  double host_output_s(DeviceGroup g) const override { return base_.host_output_s(g); }
  double copy_time_s(int first, int last, DeviceGroup g) const override { return base_.copy_time_s(first, last, g); }
  double waited_copy_time_s(int first, int last, DeviceGroup g) const override {
    return base_.waited_copy_time_s(first, last, g);
  }
  double copy_in_time_s(int first, int last, DeviceGroup g) const override { return base_.copy_in_time_s(first, last, g); }
  double copy_out_time_s(int first, int last, DeviceGroup g) const override {
    return base_.copy_out_time_s(first, last, g);
  }
  double after_first_wait_s(int first, int last, DeviceGroup g) const override {
    return base_.after_first_wait_s(first, last, g);
  }
  double tail_out_time_s(int first, int last, DeviceGroup g) const override {
    return base_.tail_out_time_s(first, last, g);
  }
  double first_wait_s(int first, int last, DeviceGroup g) const override { return base_.first_wait_s(first, last, g); }
  double head_kernels_s(int first, int last, DeviceGroup g) const override {
    return base_.head_kernels_s(first, last, g);
  }
  double head_in_time_s(int first, int last, DeviceGroup g) const override {
    return base_.head_in_time_s(first, last, g);
  }
  double execute_w(int first, int last, DeviceGroup g) const override { return base_.execute_w(first, last, g); }
  Footprint footprint(int first, int last, DeviceGroup g) const override { return base_.footprint(first, last, g); }

 private:
  const Sides& sides(int k, DeviceGroup from, DeviceGroup to) const;
  int group_index(DeviceGroup g) const;  // -1: not cached

  const CostModel& base_;
  std::vector<int> offset_;  // per kind: index of (kind, 1); back(): groups
  mutable std::vector<Sides> sides_;
  mutable std::vector<char> known_;
  mutable Sides scratch_;
};

}  // namespace dype::sched::detail
