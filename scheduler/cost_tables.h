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
};

class CostTables {
 public:
  CostTables(const SystemSpec& system, const CostModel& model, const SpaceLimits& limits = {});

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
  // How a stage's time is composed (SystemSpec::transfers). A stage on kc over [first, last] with
  // hand-off sides x_in and x_out takes
  //   serial:  x_in + C + x_out
  //   overlap: max(C - copies + waited, x_in + copies + x_out)   (kernels vs. the copy engine;
  //            copies the kernels wait for hold both)
  // written for the solvers as max(solo, x_in + chain + x_out): chain is what the open stage adds
  // to its transfer-in (C, or its copies), solo what it needs alone (0, or its kernels). Both are
  // kInf when kc cannot run the range.
  bool overlap() const { return overlap_; }
  double chain(int first, int last, int kc) const {
    const double c = compute(first, last, kc);
    return overlap_ && c < kInf ? copy(first, last, kc) : c;
  }
  double solo(int first, int last, int kc) const {
    const double c = compute(first, last, kc);
    return overlap_ ? (c < kInf ? c - copy(first, last, kc) + waited(first, last, kc) : kInf) : 0.0;
  }
  double stage_time(double x_in, int first, int last, int kc, double x_out) const {
    return std::max(solo(first, last, kc), x_in + chain(first, last, kc) + x_out);
  }
  // Output of kernel k (0 <= k < n - 1) moved from stage group kc_from to kc_to: the time it
  // occupies the sending stage (out) and the receiving one (in); CostModel::transfer_out_s/_in_s.
  double transfer_out(int k, int kc_from, int kc_to) const {
    return xout_[(static_cast<std::size_t>(k) * kcs_ + kc_from) * kcs_ + kc_to];
  }
  double transfer_in(int k, int kc_from, int kc_to) const {
    return xin_[(static_cast<std::size_t>(k) * kcs_ + kc_from) * kcs_ + kc_to];
  }

  // True when a stage never gets faster by taking one more kernel on either side (compute(a, b + 1)
  // and compute(a - 1, b) >= compute(a, b) for every group, kInf included): true for the additive
  // models. The solvers then stop extending a stage once it breaks a bound, and bound the period
  // by each kernel's fastest time alone; otherwise they scan every range.
  // Overlap: chain() and solo() each never shrink as a range grows.
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

  nlohmann::json to_json() const;

 private:
  int n_ = 0;
  std::size_t kcs_ = 0;
  bool ranges_grow_ = true;
  std::vector<int> max_count_;
  std::vector<int> offset_;
  std::vector<DeviceGroup> kc_group_;
  std::vector<PowerStates> power_;
  std::vector<char> letters_;
  std::vector<std::string> names_;
  std::vector<double> compute_;   // n * n * kcs (upper triangle used)
  std::vector<double> copy_;      // like compute_; empty when the model has no copies in compute
  std::vector<double> waited_;    // like compute_; empty when no copy holds the kernels up
  bool overlap_ = false;
  std::vector<double> xout_, xin_;  // (n - 1) * kcs * kcs each
  std::vector<double> entry_, exit_;  // per kc; empty = 0
  std::vector<double> host_in_, host_out_;  // per kc: CostModel::host_input_s / host_output_s (dump only)
  std::vector<double> short_;         // like compute_; empty when no range is short of memory
  std::vector<double> exec_w_;        // like compute_; empty when the model gives no per-range power
};

}  // namespace dype::sched
