#pragma once
// RuntimeCostModel: the scheduler's cost model of what this runtime does with a plan (below), and
// the shard helpers it prices stages with. SchedPlanner (planner.h) builds one per solve.
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include "hw/system.h"
#include "runtime/handoff_route.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "runtime/planning/planning_kinds.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"

namespace dype::rt {

// One device's time for one kernel shape (seconds, a prediction); kInf when it cannot run it.
using KernelTimeFn = std::function<double(const hw::Device&, const kernels::OpShape&)>;

// The scheduler's cost model for what this runtime does with a plan (pipeline.cpp, transfer.cpp),
// on the devices a plan would get (to_pipeline_spec's choice), with link times from hw::Topology:
//  - a stage of c devices splits the rows evenly (SpMM stages by nnz; modelled as even) and each
//    device runs its shard: the kernel time is that of the shard's shape (launch overheads and
//    per-row terms do not shrink with c, unlike time / c);
//  - inside a stage, an SpMM needs every row of its input and a window attention its rows plus a
//    halo of window / 2; the transfer engine moves them by the route handoff_route.h picks from
//    the topology (a relay through host memory, or direct peer copies of each device's rows) and
//    the stage's f_perf includes that exchange until every device holds its rows (paper Section
//    II-B);
//  - the first stage receives the request's input from host memory (all of it on every device
//    when the first kernel is an SpMM) and the last stage returns its output rows to host memory:
//    part of those stages' time (the paper's Figure 4 counts the CPU<->device legs too);
//  - between stages: when the next stage's devices need more rows than they own (an SpMM, a
//    halo), the route handoff_route.h picks, each side charged its own busiest device (senders
//    their sends or up legs, receivers their receives or down legs); otherwise a 1-device stage
//    hands a 1-device stage its whole tensor with one peer copy (P2P when the topology allows,
//    else host-staged; a copy occupies both ends), equal counts with the same row split and a
//    row-local next kernel copy shard to shard, and anything else goes through host memory (rows
//    up on the source devices, the rows each destination needs down on it); with equal counts both
//    sides are charged the longer leg (the row splits may coincide, and the engine then copies
//    shard to shard through host memory, occupying both ends).
// Exchange legs are counted as compute for the energy figure (the device is busy either way).
class RuntimeCostModel : public sched::CostModel {
 public:
  RuntimeCostModel(const Model& model, const hw::System& system, const sched::SystemSpec& spec,
                   const std::set<std::string>& excluded, const Characteristics& c,
                   const KernelTimeFn& kernel_time, const FpgaImagePlan* images = nullptr);
  int num_kernels() const override { return n_; }
  double compute_time_s(int first, int last, sched::DeviceGroup group) const override;
  // The exchanges between a stage's devices and the host legs inside compute_time_s.
  double copy_time_s(int first, int last, sched::DeviceGroup group) const override;
  // The exchanges: a stage's next kernel waits for them.
  double waited_copy_time_s(int first, int last, sched::DeviceGroup group) const override;
  // Per direction: the upload and each exchange's down legs or received copies inbound, the
  // download and each exchange's up legs or sent copies outbound (handoff_route.h).
  double copy_in_time_s(int first, int last, sched::DeviceGroup group) const override;
  double copy_out_time_s(int first, int last, sched::DeviceGroup group) const override;
  // From the first exchange inside [first, last] on: that exchange, the later ones and the
  // kernels from it to `last`; the download when `last` is the chain's end.
  double after_first_wait_s(int first, int last, sched::DeviceGroup group) const override;
  double tail_out_time_s(int first, int last, sched::DeviceGroup group) const override;
  // The first exchange inside [first, last], the kernels before it, the upload before `first`
  // when it is the chain's start.
  double first_wait_s(int first, int last, sched::DeviceGroup group) const override;
  double head_kernels_s(int first, int last, sched::DeviceGroup group) const override;
  double head_in_time_s(int first, int last, sched::DeviceGroup group) const override;
  double output_bytes(int k) const override { return out_[static_cast<std::size_t>(k)]; }
  // The larger side of the hand-off (the symmetric figure of the paper's Algorithm 1).
  double transfer_time_s(int k, sched::DeviceGroup from, sched::DeviceGroup to) const override;
  // Each side's own time: what the transfer engine occupies the sending and receiving devices for.
  double transfer_out_s(int k, sched::DeviceGroup from, sched::DeviceGroup to) const override;
  double transfer_in_s(int k, sched::DeviceGroup from, sched::DeviceGroup to) const override;
  Sides transfer_sides(int k, sched::DeviceGroup from, sched::DeviceGroup to) const override;  // one route
  // The request's upload to a first stage and the result's download from a last stage (inside
  // compute_time_s of the ranges at the chain's ends).
  double host_input_s(sched::DeviceGroup g) const override { return group(g).upload_s; }
  double host_output_s(sched::DeviceGroup g) const override { return group(g).download_s; }
  sched::Footprint footprint(int first, int last, sched::DeviceGroup group) const override;
  double execute_w(int first, int last, sched::DeviceGroup group) const override;

 private:
  struct Group {
    std::vector<int> topo;                 // topology indices of its devices
    std::vector<double> kernel_s;          // [k] shard time
    std::vector<double> exchange_s;        // [k] gather before k when k is not the stage's first
    std::vector<double> exchange_in_s;     // [k] its inbound direction (busiest device)
    std::vector<double> exchange_out_s;    // [k] its outbound direction
    std::vector<double> execute_w;         // [k] a device's power while it runs k (per op)
    double upload_s = 0.0;                 // host -> devices, kernel 0's input
    double download_s = 0.0;               // devices -> host, the last kernel's output
  };
  const Group& group(sched::DeviceGroup g) const;
  struct Handoff {
    double out_s = 0.0, in_s = 0.0;
  };
  Handoff handoff(int k, sched::DeviceGroup from, sched::DeviceGroup to) const;
  // The route handoff_route.h picks for kernel k's input going from devices `from` (owning even
  // row shares) to devices `to` (needing what k reads); nullopt when no device needs more rows
  // than it owns.
  std::optional<RouteCost> routed(int k, const std::vector<int>& from, const std::vector<int>& to) const;
  double up_s(const Group& g, double bytes_per_device, int tensors) const;
  double down_s(const Group& g, double bytes_per_device, int tensors) const;
  // Bytes one device of a c-device stage must hold of kernel k's input (rows it needs).
  double need_bytes(int k, int c) const;

  const Model& model_;
  const hw::Topology& topo_;
  bool overlap_ = false;  // copies on per-direction engines (hw SystemConfig::overlap_transfers)
  Characteristics c_;
  int n_ = 0;
  std::int64_t rows_ = 0;
  std::vector<double> out_, in_;
  std::vector<int> in_tensors_;
  std::vector<kernels::OpShape> shapes_;  // whole-input shapes, for footprint()
  std::vector<std::size_t> offset_;  // per kind: index of (kind, count 1) in groups_
  std::vector<Group> groups_;
  std::vector<std::vector<int>> kind_topo_;  // per kind: topology indices in system order
  // Multi-host systems: each kind's host (0: this machine; the NICs are the topology's). A stage on
  // another host is reached through this machine (runtime/remote/: the coordinator relays every
  // hand-off to or from it), so each hand-off crosses one NIC leg per remote end.
  std::vector<int> kind_host_;
};

}  // namespace dype::rt
