#pragma once
// The numbers one solve works on, computed once: C[first][last][kc] and X[k][kc_from][kc_to],
// with kc indexing (kind, count) pairs kind-major (kc = offset[kind] + count - 1). Every solver,
// the brute-force enumerator and plan evaluation read the same tables, so they agree on what a
// plan costs. Dumpable as JSON ("full cost tables", dype-schedule --dump-tables).
#include <algorithm>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "scheduler/cost_model.h"
#include "scheduler/system.h"

namespace dype::sched {

// Restrictions of the search space (baselines are restricted solves).
struct SpaceLimits {
  std::vector<int> max_count;                // per kind; empty = the system's counts
  std::vector<std::uint32_t> allowed_kinds;  // per kernel, bit t = may run on kind t; empty = all
  // Kinds a recurrent shape's stages may use (bit t; recurrent.h): the runtime runs no recurrent
  // pipeline through another host's stages, so its planner leaves those kinds out of them.
  std::uint32_t recurrent_kinds = ~0u;
};

class CostTables {
 public:
  CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits = {});
  // The same numbers, with each hand-off asked of `model` only when first read (solve_shapes(): a
  // solve skipped by its bound reads none, a bounded period check a few): `model` must outlive
  // these tables and every copy of them, and reading them is not thread-safe.
  struct LazyTransfers {};
  CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits, LazyTransfers);

  int num_kernels() const { return n_; }
  int num_kinds() const { return static_cast<int>(max_count_.size()); }
  int num_kc() const { return static_cast<int>(kc_group_.size()); }
  DeviceGroup group(int kc) const { return kc_group_[kc]; }
  int kc(DeviceGroup g) const { return offset_[g.kind] + g.count - 1; }
  int max_count(int kind) const { return max_count_[kind]; }
  const std::vector<int>& max_counts() const { return max_count_; }
  const PowerStates& power(int kind) const { return power_[kind]; }
  char letter(int kind) const { return letters_[kind]; }
  const std::string& kind_name(int kind) const { return names_[kind]; }
  // The kind's host (SystemSpec::host_name; "" when the system lists no hosts).
  const std::string& host_name(int kind) const { return hosts_[kind]; }

  double compute(int first, int last, int kc) const {
    return compute_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  // The copies inside compute() (CostModel::copy_time_s; 0 when the model has none), and those of
  // them the kernels wait for (CostModel::waited_copy_time_s).
  double copy(int first, int last, int kc) const {
    return copy_.empty() ? 0.0 : copy_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  double waited(int first, int last, int kc) const {
    return waited_.empty() ? 0.0 : waited_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  // The copies inside compute() on a device's inbound and outbound directions
  // (CostModel::copy_in_time_s / copy_out_time_s; each at most copy()).
  double copy_in(int first, int last, int kc) const {
    return cin_.empty() ? copy(first, last, kc) : cin_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  double copy_out(int first, int last, int kc) const {
    return cout_.empty() ? copy(first, last, kc) : cout_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  // What the previous request's outbound copies hold up (CostModel::after_first_wait_s +
  // tail_out_time_s when the first is > 0, else 0; overlap only).
  double blocked(int first, int last, int kc) const {
    return blocked_.empty() ? 0.0 : blocked_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  // The inbound stall (overlap only): a stage entered with x_in whose input does not fit before
  // its first waited exchange (x_in + head_in > head kernels) runs input, head kernels and that
  // exchange one after the other; 0 otherwise.
  double stall(double x_in, int first, int last, int kc) const {
    if (wait_.empty()) return 0.0;
    const Wait& w = wait_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
    return w.first_wait > 0 && x_in + w.head_in > w.head_kernels ? x_in + w.head_in + w.head_kernels + w.first_wait : 0.0;
  }
  // How a stage's time is composed (SystemSpec::transfers). A stage on kc over [first, last] with
  // hand-off sides x_in and x_out takes
  //   serial:  x_in + C + x_out
  //   overlap: max(C - copies + waited, x_in + copies_in, max(copies_out, blocked) + x_out)
  //            (the kernels, the inbound copy direction, the outbound one: links are full duplex
  //            and each direction has its own engine; copies the kernels wait for hold both;
  //            `blocked`: the kernels from the first waited exchange on, which wait for the
  //            previous request's output to leave on the outbound engine)
  //            and `stall` (an input that does not fit before the first waited exchange, below)
  //            counted with the inbound side,
  // written for the solvers as max(alone, carried + x_out): `carried` is what an open stage
  // entered with x_in hands to its closing transfer-out (x_in + C, or max(copies_out, blocked)),
  // `alone` what it needs whatever x_out is (0, or the kernels, x_in + copies_in and the stall).
  // Both are kInf when kc cannot run the range.
  bool overlap() const { return overlap_; }
  double carried(double x_in, int first, int last, int kc) const {
    const double c = compute(first, last, kc);
    if (!(c < kInf)) return kInf;
    return overlap_ ? std::max(copy_out(first, last, kc), blocked(first, last, kc)) : x_in + c;
  }
  double alone(double x_in, int first, int last, int kc) const {
    const double c = compute(first, last, kc);
    if (!(c < kInf)) return kInf;
    return overlap_ ? std::max({solo(first, last, kc), x_in + copy_in(first, last, kc), stall(x_in, first, last, kc)})
                    : 0.0;
  }
  // The kernels and the copies they wait for (overlap; kInf when kc cannot run the range).
  double solo(int first, int last, int kc) const {
    const double c = compute(first, last, kc);
    return c < kInf ? c - copy(first, last, kc) + waited(first, last, kc) : kInf;
  }
  double stage_time(double x_in, int first, int last, int kc, double x_out) const {
    return std::max(alone(x_in, first, last, kc), carried(x_in, first, last, kc) + x_out);
  }
  // The largest transfer-in a stage over [first, last] on kc may open with so that it fits in
  // `cap` and carries at most `carry_cap` to its closing transfer-out; -kInf when none does.
  double room_for_transfer_in(int first, int last, int kc, double carry_cap, double cap) const {
    const double c = compute(first, last, kc);
    if (!(c < kInf)) return -kInf;
    if (!overlap_) return carry_cap - c;
    if (carried(0.0, first, last, kc) > carry_cap || solo(first, last, kc) > cap) return -kInf;
    double room = cap - copy_in(first, last, kc);
    if (!wait_.empty()) {
      const Wait& w = wait_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
      // Either the input fits before the first waited exchange, or the stall fits in cap.
      if (w.first_wait > 0) room = std::min(room, std::max(w.head_kernels - w.head_in, cap - w.head_in - w.head_kernels - w.first_wait));
    }
    return room;
  }
  // Output of kernel k (0 <= k < n - 1) moved from stage group kc_from to kc_to: the time it
  // occupies the sending stage (out) and the receiving one (in); CostModel::transfer_out_s/_in_s.
  double transfer_out(int k, int kc_from, int kc_to) const {
    const std::size_t i = (static_cast<std::size_t>(k) * kcs_ + kc_from) * kcs_ + kc_to;
    if (lazy_ && !known_[i]) [[unlikely]] ask(i);
    return xout_[i];
  }
  double transfer_in(int k, int kc_from, int kc_to) const {
    const std::size_t i = (static_cast<std::size_t>(k) * kcs_ + kc_from) * kcs_ + kc_to;
    if (lazy_ && !known_[i]) [[unlikely]] ask(i);
    return xin_[i];
  }

  // True when a stage never gets faster by taking one more kernel on either side (compute(a, b + 1)
  // and compute(a - 1, b) >= compute(a, b) for every group, kInf included): true for the additive
  // models. The solvers then stop extending a stage once it breaks a bound, and bound the period
  // by each kernel's fastest time alone; otherwise they scan every range.
  // Overlap: solo(), copy_in() and carried() each never shrink as a range grows.
  bool ranges_grow() const { return ranges_grow_; }

  // Transfers at the pipeline's ends, per group: entry(kc) into the first stage when it runs on
  // kc, exit(kc) out of the last stage (both 0 by default: the request's input is resident where
  // stage 1 runs and the result stays where the last stage ran, plan.h). kInf forbids kc at that
  // end. A layer-recurrent solve (recurrent.h) sets them to the hand-off from the last stage back
  // to the first for one (first, last) pair of groups at a time; every solver, figures() and the
  // brute force read them, so they agree.
  // Per-device execute power of group kc over kernels [first, last] (CostModel::execute_w, at
  // least the kind's idle power; the kind's exec_w when the model gives none).
  double exec_w(int first, int last, int kc) const {
    return exec_w_.empty() ? power_[kc_group_[kc].kind].exec_w
                           : exec_w_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }

  // How many bytes one device of group kc lacks to hold kernels [first, last] (0 when they fit or
  // the kind's memory is not limited). Such ranges are unsupported (compute kInf).
  double memory_shortfall(int first, int last, int kc) const {
    return short_.empty() ? 0.0 : short_[(static_cast<std::size_t>(first) * n_ + last) * kcs_ + kc];
  }
  bool memory_limited() const { return !short_.empty(); }

  double entry(int kc) const { return entry_.empty() ? 0.0 : entry_[static_cast<std::size_t>(kc)]; }
  double exit(int kc) const { return exit_.empty() ? 0.0 : exit_[static_cast<std::size_t>(kc)]; }
  // Empty vectors restore the defaults; otherwise one entry per group.
  void set_ends(std::vector<double> entry, std::vector<double> exit);

  // Kernels [first, last] alone, as a chain of their own (the module subproblems of
  // scheduler/solver/lower_bound.h and milp-split): every per-range table and power copied, the
  // ends 0 except where the range keeps the chain's own entry (first == 0) or exit.
  CostTables sub_chain(int first, int last) const;
  // At most max_count[kind] devices of each kind (a device budget, at most the current counts).
  // The groups above it stay in the tables: the MILP and the brute force skip them by their count.
  void limit_counts(const std::vector<int>& max_count);

  nlohmann::json to_json() const;

 private:
  CostTables() = default;
  CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits, bool lazy);
  void ask(std::size_t i) const;  // hand-off i of a lazy table, from its model when not known yet
  void materialise() const;       // every hand-off of a lazy table
  int n_ = 0;
  std::size_t kcs_ = 0;
  bool ranges_grow_ = true;
  std::vector<int> max_count_;
  std::vector<int> offset_;
  std::vector<DeviceGroup> kc_group_;
  std::vector<PowerStates> power_;
  std::vector<char> letters_;
  std::vector<std::string> names_;
  std::vector<std::string> hosts_;
  std::vector<double> compute_;   // n * n * kcs (upper triangle used)
  std::vector<double> copy_;      // like compute_; empty when the model has no copies in compute
  std::vector<double> waited_;    // like compute_; empty when no copy holds the kernels up
  std::vector<double> cin_, cout_;  // like compute_; empty when equal to copy_
  std::vector<double> blocked_;     // like compute_; empty when 0 everywhere (or serial)
  struct Wait {
    double first_wait = 0.0, head_kernels = 0.0, head_in = 0.0;
  };
  std::vector<Wait> wait_;          // like compute_; empty when no range waits (or serial)
  bool overlap_ = false;
  mutable std::vector<double> xout_, xin_;  // (n - 1) * kcs * kcs each
  bool lazy_ = false;                        // hand-offs asked when first read
  mutable std::vector<char> known_;          // lazy tables: which hand-offs were asked
  const CostModel* model_ = nullptr;         // lazy tables: where the others come from
  std::vector<double> entry_, exit_;  // per kc; empty = 0
  std::vector<double> host_in_, host_out_;  // per kc: CostModel::host_input_s / host_output_s (dump only)
  std::vector<double> short_;         // like compute_; empty when no range is short of memory
  std::vector<double> exec_w_;        // like compute_; empty when the model gives no per-range power
};

}  // namespace dype::sched
