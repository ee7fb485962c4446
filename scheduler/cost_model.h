#pragma once
// What the scheduler asks about time: f_perf and f_comm of the paper, as a narrow interface that
// adapters over perfmodel/ (fitted regressions) and hw::Topology implement. Every figure a cost
// model returns is a prediction (modelled), never a measurement.
//
// Kernel indices are 0-based positions in the workload chain; ranges are inclusive.
#include <limits>
#include <vector>

#include "scheduler/system.h"
#include "scheduler/workload.h"

namespace dype::sched {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// What one device of a stage must hold (bytes), for the memory-capacity constraint: the weights
// of every kernel it runs (replicated on each device), its share of the graph (the rows it owns
// after the row split: kernels of one request share one graph, so the largest share counts) and
// the activations of the requests in flight (kInFlight: the one it computes and the one arriving;
// per kernel its input rows plus its output rows, the largest kernel counts). Modelled.
struct Footprint {
  static constexpr double kInFlight = 2.0;
  double weights = 0.0, graph = 0.0, activations = 0.0;
  double total() const { return weights + graph + kInFlight * activations; }
  // Another kernel on the same device: weights add, graph and activations take the larger.
  void add(const Footprint& o);
};

// Kernel `shape`'s footprint on one device of a c-device stage: GEMM weights (k x n + bias) and
// layer-norm gamma/beta are replicated; an SpMM holds its 1/c of the CSR (8 bytes a nonzero plus
// the row pointers) and needs its whole input (every row may be a neighbour); other inputs and
// every output are split by rows.
Footprint kernel_footprint(const kernels::OpShape& shape, double input_bytes, double output_bytes, int c);

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual int num_kernels() const = 0;
  // f_perf: time for `group` to run kernels [first, last] back to back, including the
  // scatter/gather among the group's devices. kInf when the kind cannot run one of the kernels.
  virtual double compute_time_s(int first, int last, DeviceGroup group) const = 0;
  // FP32 bytes kernel `k` hands to kernel k + 1.
  virtual double output_bytes(int k) const = 0;
  // f_comm for the output of kernel `k` between adjacent stages.
  virtual double transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const = 0;
  // The same hand-off split by side: how long it occupies the sending stage's devices (out) and
  // the receiving stage's (in). A transfer through host memory occupies the sender for its up leg
  // and the receiver for its down leg; one device sending to several pays every copy, each
  // receiver its own. Both default to transfer_time_s: the paper's Algorithm 1 charges one X to
  // both stages.
  virtual double transfer_out_s(int k, DeviceGroup from, DeviceGroup to) const { return transfer_time_s(k, from, to); }
  virtual double transfer_in_s(int k, DeviceGroup from, DeviceGroup to) const { return transfer_time_s(k, from, to); }
  // Both sides at once (what CostTables asks for): a model that works out one route for both
  // overrides it; the default asks each side.
  struct Sides {
    double out_s = 0.0, in_s = 0.0;
  };
  virtual Sides transfer_sides(int k, DeviceGroup from, DeviceGroup to) const {
    return {transfer_out_s(k, from, to), transfer_in_s(k, from, to)};
  }
  // The request's input from host memory to a first stage on `group`, and the result back from a
  // last stage on it, where the model counts them (RuntimeCostModel: part of those stages'
  // compute_time_s, reported apart so the dumped tables show them); 0 when the model has none.
  virtual double host_input_s(DeviceGroup group) const {
    (void)group;
    return 0.0;
  }
  virtual double host_output_s(DeviceGroup group) const {
    (void)group;
    return 0.0;
  }
  // The part of compute_time_s(first, last, group) that is copies (the exchanges between a stage's
  // devices, the host legs at the chain's ends): on the copy engines when transfers overlap
  // compute (TransferMode::overlap). 0 when the model has none.
  virtual double copy_time_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  // The part of copy_time_s that the same request's next kernel waits for (an exchange between a
  // stage's devices before a kernel that reads every row): it holds the kernels up as well as the
  // copy engine, so it counts on both sides of an overlapping stage. At most copy_time_s.
  virtual double waited_copy_time_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  // Which of copy_time_s's copies take a device's inbound direction (host -> device, peer copies
  // received) and which its outbound one (device -> host, peer copies sent). Links are full
  // duplex and devices copy each way on their own engine, so with overlapping transfers the two
  // directions fill up separately; an exchange between a stage's devices takes both. Default:
  // every copy in both directions (one engine).
  virtual double copy_in_time_s(int first, int last, DeviceGroup group) const {
    return copy_time_s(first, last, group);
  }
  virtual double copy_out_time_s(int first, int last, DeviceGroup group) const {
    return copy_time_s(first, last, group);
  }
  // With overlapping transfers a stage's outbound engine sends the previous request's output
  // (its hand-off out, the download after the last kernel: tail_out_time_s) while this request's
  // first kernels run; an exchange the kernels wait for needs that engine too, so everything from
  // the first such exchange on (after_first_wait_s: those exchanges and kernels) starts only once
  // the output has left. Both 0 by default (no exchange, nothing after the kernels).
  virtual double after_first_wait_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  virtual double tail_out_time_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  // The inbound side of the same: the next request's input (its hand-off in, the upload before
  // the first kernel: head_in_time_s) arrives on the inbound engine, which this request's first
  // waited exchange (first_wait_s, 0 when none) needs too. The input fits in the gap the kernels
  // before that exchange (head_kernels_s) leave, or the kernels wait for it.
  virtual double first_wait_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  virtual double head_kernels_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  virtual double head_in_time_s(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return 0.0;
  }
  // Per-device power while `group` runs kernels [first, last] (watts): each kernel's execute power
  // (paper Table II: the U280 draws 55 W dynamic for SpMM, 50.2 W for window attention) weighted
  // by its time. Negative: the kind's one figure (PowerStates::exec_w).
  virtual double execute_w(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return -1.0;
  }
  // Per device of `group` running kernels [first, last]; a model that does not know (tables) says
  // nothing, and the memory constraint does not apply to it.
  virtual Footprint footprint(int first, int last, DeviceGroup group) const {
    (void)first, (void)last, (void)group;
    return {};
  }
};

// Additive model: a stage's time is the sum of per-kernel times (prefix sums, O(1) a query),
// divided over the devices with a parallel efficiency, plus the intra-stage exchange that row
// splitting needs (paper Section II-B: gather-scatter costs are part of f_perf):
//  - the c devices of a stage each own a slice of rows (static graph and weights preloaded); the
//    stage's input arrives already sliced, over the aggregate bandwidth of the devices (that is
//    X_s, f_comm), and its output leaves sliced, so the stage pays nothing more for them;
//  - row-local kernels (GEMM, softmax, layer norm; window attention up to a halo of w/2 rows,
//    ignored) need only their own slice;
//  - an SpMM reads every row of its dense input (a row's neighbours can be anywhere), so before it
//    the devices all-gather: each receives the (c - 1) / c of the input it lacks over its own link,
//    all in parallel (P2P), or staged through host memory (its slice up, the rest down); a host
//    kind shares memory and pays nothing.
// Transfers between stages use SystemSpec::transfer_time_s. When the system spans hosts, a first
// stage on another host than the coordinator (SystemSpec::hosts[0]) receives the request's input
// over the NICs and a last stage there sends the answer back (SystemSpec::host_input_time_s /
// host_output_time_s): part of those stages' compute, reported as copies (inbound for the input,
// outbound for the answer) so that overlapping transfers put them on the copy engines.
// Single-device kernel times come from
// a table (a perf model's or a device model's predictions) or from the kinds' effective GFLOP/s
// (`from_gflops`, a rough roofline for demos and benchmarks). All modelled.
class AdditiveCostModel : public CostModel {
 public:
  // kernel_time_s[k][kind] = one-device time of kernel k on that kind; kInf = unsupported.
  // ops[k] = kernel k's op (decides the all-gather above); empty = treat every kernel as an SpMM
  // (the most exchange any kernel needs).
  AdditiveCostModel(SystemSpec system, std::vector<double> output_bytes,
                    std::vector<double> input_bytes, std::vector<std::vector<double>> kernel_time_s,
                    double parallel_efficiency = 0.9, std::vector<kernels::OpKind> ops = {});
  static AdditiveCostModel from_gflops(const SystemSpec& system, const Workload& workload,
                                       double parallel_efficiency = 0.9);

  int num_kernels() const override { return static_cast<int>(out_bytes_.size()); }
  double compute_time_s(int first, int last, DeviceGroup group) const override;
  double output_bytes(int k) const override { return out_bytes_[k]; }
  double transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const override;
  double host_input_s(DeviceGroup group) const override;
  double host_output_s(DeviceGroup group) const override;
  double copy_time_s(int first, int last, DeviceGroup group) const override {
    return copy_in_time_s(first, last, group) + copy_out_time_s(first, last, group);
  }
  double copy_in_time_s(int first, int last, DeviceGroup group) const override {
    (void)last;
    return first == 0 ? host_input_s(group) : 0.0;
  }
  double copy_out_time_s(int first, int last, DeviceGroup group) const override {
    (void)first;
    return last == num_kernels() - 1 ? host_output_s(group) : 0.0;
  }
  Footprint footprint(int first, int last, DeviceGroup group) const override;
  double execute_w(int first, int last, DeviceGroup group) const override;
  const SystemSpec& system() const { return system_; }
  // Execute power per kernel and kind, watts ([k][kind]; empty: the kinds' exec_w).
  void set_kernel_power(const std::vector<std::vector<double>>& watts);
  // The kernels' shapes, for footprint() (from_gflops and the device-model inputs set them).
  void set_shapes(std::vector<kernels::OpShape> shapes);

 private:
  SystemSpec system_;
  std::vector<double> out_bytes_;
  std::vector<double> in_bytes_;
  std::vector<std::vector<double>> prefix_;       // [kind][k + 1] = sum of times of kernels < k+1
  std::vector<std::vector<int>> unsupported_;     // [kind][k + 1] = count of unsupported < k+1
  std::vector<double> gathered_prefix_;           // [k + 1] = input bytes all-gathered by kernels < k+1
  std::vector<kernels::OpShape> shapes_;          // empty: footprint unknown
  std::vector<std::vector<double>> energy_prefix_;  // [kind][k + 1] = sum of time x power of kernels < k+1
  double efficiency_;
};

// Explicit tables, for tests and for replaying dumped cost tables: compute[first][last][kc] and
// transfer[k][kc_from][kc_to], with kc the (kind, count) index of CostTables (kind-major).
class TableCostModel : public CostModel {
 public:
  TableCostModel(std::vector<int> kind_counts, int num_kernels);
  int num_kernels() const override { return n_; }
  double compute_time_s(int first, int last, DeviceGroup group) const override;
  double output_bytes(int k) const override { return bytes_[k]; }
  double transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const override;

  void set_compute(int first, int last, DeviceGroup g, double t);
  void set_transfer(int k, DeviceGroup from, DeviceGroup to, double t);
  void set_output_bytes(int k, double b) { bytes_[k] = b; }
  int kc(DeviceGroup g) const { return offset_[g.kind] + g.count - 1; }
  int num_kc() const { return offset_.back(); }

 private:
  std::vector<int> offset_;
  int n_;
  std::vector<double> compute_;
  std::vector<double> transfer_;
  std::vector<double> bytes_;
};

}  // namespace dype::sched
