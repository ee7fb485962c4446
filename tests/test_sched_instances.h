// Random scheduler instances for the solver tests: tables of compute and transfer times over up to
// 3 device kinds, objectives with caps around what an instance can reach, and cost models that
// draw a hand-off's two sides apart or overlap copies with compute.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/solver.h"

namespace dype::sched {

struct Instance {
  SystemSpec system;
  std::unique_ptr<TableCostModel> model;
};

// Up to `max_kernels` kernels, up to 3 kinds with up to 3 devices each. Stage times are
// sub-additive in the devices with random gather/scatter overheads (so more devices is not always
// faster); transfers are random per (boundary, source group, destination group).
// monotone: efficiency and overhead fixed per (kind, count), so a stage never gets faster by
// taking one more kernel (CostTables::ranges_grow(), which lets the solvers cut ranges short).
inline Instance random_instance(std::mt19937_64& rng, int max_kernels = 7, bool monotone = false) {
  std::uniform_int_distribution<int> nk(1, max_kernels), nkinds(1, 3), ncount(1, 3);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto logu = [&](double lo, double hi) { return lo * std::pow(hi / lo, u01(rng)); };
  Instance in;
  const int n = nk(rng);
  const int kinds = nkinds(rng);
  std::vector<int> counts;
  for (int t = 0; t < kinds; ++t) {
    DeviceKindSpec d;
    d.name = std::string("k") + char('0' + t);
    d.letter = "FGC"[t];
    d.count = ncount(rng);
    d.power.idle_w = logu(5, 60);
    d.power.exec_w = d.power.idle_w + logu(1, 300);
    d.power.xfer_w = d.power.idle_w + logu(0.5, 100);
    d.link_bw_bytes_per_s = 1e9;
    in.system.kinds.push_back(d);
    counts.push_back(d.count);
  }
  in.model = std::make_unique<TableCostModel>(counts, n);
  std::vector<std::vector<double>> base(n, std::vector<double>(kinds));
  for (int k = 0; k < n; ++k) {
    for (int t = 0; t < kinds; ++t) base[k][t] = u01(rng) < 0.12 ? kInf : logu(0.1, 10);
  }
  std::vector<std::vector<double>> fixed_eff(kinds, std::vector<double>(4)), fixed_ovh = fixed_eff;
  for (int t = 0; t < kinds; ++t) {
    for (int c = 1; c <= 3; ++c) {
      fixed_eff[t][c] = 0.6 + 0.4 * u01(rng);
      fixed_ovh[t][c] = (c - 1) * logu(0.01, 2);
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int t = 0; t < kinds; ++t) {
      double sum = 0;
      for (int b = a; b < n; ++b) {
        sum += base[b][t];
        for (int c = 1; c <= counts[t]; ++c) {
          const double eff = monotone ? fixed_eff[t][c] : 0.6 + 0.4 * u01(rng);
          const double ovh = monotone ? fixed_ovh[t][c] : (c - 1) * logu(0.01, 2);
          const double t_c = c == 1 ? sum : sum / (c * eff) + ovh;
          in.model->set_compute(a, b, {t, c}, t_c);
        }
      }
    }
  }
  for (int k = 0; k + 1 < n; ++k) {
    for (int t = 0; t < kinds; ++t) {
      for (int c = 1; c <= counts[t]; ++c) {
        for (int t2 = 0; t2 < kinds; ++t2) {
          for (int c2 = 1; c2 <= counts[t2]; ++c2) {
            in.model->set_transfer(k, {t, c}, {t2, c2}, u01(rng) < 0.1 ? 0.0 : logu(0.01, 5));
          }
        }
      }
    }
  }
  return in;
}

// `o` with a random balance ratio and, for qos, targets around what `all` can reach (some
// infeasible on purpose).
inline ObjectiveSpec random_objective(Objective o, const std::vector<EnumeratedPlan>& all, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  double p_min = kInf, l_min = kInf;
  for (const auto& p : all) {
    p_min = std::min(p_min, p.period_s);
    l_min = std::min(l_min, p.latency_s);
  }
  ObjectiveSpec spec{.objective = o, .balance_ratio = 0.3 + 0.7 * u01(rng)};
  if (o == Objective::latency && p_min < kInf && u01(rng) < 0.6) {
    spec.min_throughput_per_s = (1.0 / p_min) * (0.4 + 0.7 * u01(rng));
  }
  if (o == Objective::qos && p_min < kInf) {
    if (u01(rng) < 0.8) spec.min_throughput_per_s = (1.0 / p_min) * (0.4 + 0.7 * u01(rng));
    if (u01(rng) < 0.6) spec.max_latency_s = l_min * (0.9 + 1.5 * u01(rng));
  }
  return spec;
}

// Hand-offs whose two sides differ (CostModel::transfer_out_s / transfer_in_s: a sender copying
// to several devices, legs through host memory on links of different widths): the sender's and
// the receiver's times are drawn apart; every solver pass and bound reads both.
class SidedTransfers final : public CostModel {
 public:
  SidedTransfers(const TableCostModel& base, std::mt19937_64& rng, const std::vector<int>& counts) : base_(base) {
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    for (int k = 0; k + 1 < base.num_kernels(); ++k)
      for (std::size_t t = 0; t < counts.size(); ++t)
        for (int c = 1; c <= counts[t]; ++c)
          for (std::size_t t2 = 0; t2 < counts.size(); ++t2)
            for (int c2 = 1; c2 <= counts[t2]; ++c2) {
              const double x = base.transfer_time_s(k, {static_cast<int>(t), c}, {static_cast<int>(t2), c2});
              // One side keeps the drawn time, the other gets a share of it (or more, a slower link).
              const double f = u01(rng) < 0.5 ? 0.2 + 0.8 * u01(rng) : 1.0 + 2.0 * u01(rng);
              const bool sender = u01(rng) < 0.5;
              sides_[{k, static_cast<int>(t), c, static_cast<int>(t2), c2}] = sender ? std::pair{x * f, x} : std::pair{x, x * f};
            }
  }
  int num_kernels() const override { return base_.num_kernels(); }
  double compute_time_s(int a, int b, DeviceGroup g) const override { return base_.compute_time_s(a, b, g); }
  double output_bytes(int k) const override { return base_.output_bytes(k); }
  double transfer_time_s(int k, DeviceGroup f, DeviceGroup t) const override {
    return std::max(transfer_out_s(k, f, t), transfer_in_s(k, f, t));
  }
  double transfer_out_s(int k, DeviceGroup f, DeviceGroup t) const override {
    return sides_.at({k, f.kind, f.count, t.kind, t.count}).first;
  }
  double transfer_in_s(int k, DeviceGroup f, DeviceGroup t) const override {
    return sides_.at({k, f.kind, f.count, t.kind, t.count}).second;
  }

 private:
  const TableCostModel& base_;
  std::map<std::tuple<int, int, int, int, int>, std::pair<double, double>> sides_;
};

// Overlapping transfers (SystemSpec::transfers = overlap): a stage takes max(kernels, X_in +
// inbound copies, outbound copies + X_out), its copies a random share of each range's time and
// each direction a random part of them. The label DP, the period search and their pruning bounds
// must stay exact: every objective against brute force.
class CopiesInCompute final : public CostModel {
 public:
  CopiesInCompute(const CostModel& base, std::uint64_t seed) : base_(base), seed_(seed) {}
  int num_kernels() const override { return base_.num_kernels(); }
  double compute_time_s(int a, int b, DeviceGroup g) const override { return base_.compute_time_s(a, b, g); }
  double copy_time_s(int a, int b, DeviceGroup g) const override {
    // A fixed pseudo-random share in [0, 0.9) per (range, group).
    const double c = compute_time_s(a, b, g);
    return c < kInf ? c * 0.9 * static_cast<double>(hash(a, b, g, 0) % 1000) / 1000.0 : 0.0;
  }
  // Half the instances: each direction a random part of the copies in [0.2, 1] (the other
  // half: every copy in both directions, one engine). Sums of parts grow with the range, as the
  // exchanges and host legs they stand for do.
  double copy_in_time_s(int a, int b, DeviceGroup g) const override { return part(a, b, g, 1); }
  double copy_out_time_s(int a, int b, DeviceGroup g) const override { return part(a, b, g, 2); }
  // Ranges with waited copies: their first exchange a part of them, the kernels before it a part
  // of the kernels (the rest comes after), the upload before kernel 0 and the download after the
  // last parts of the other copies, so the inbound stall and the outbound block bind now and then.
  double first_wait_s(int a, int b, DeviceGroup g) const override {
    return waited_copy_time_s(a, b, g) * (0.3 + 0.7 * frac(a, b, g, 3));
  }
  double head_kernels_s(int a, int b, DeviceGroup g) const override { return kernels(a, b, g) * frac(a, b, g, 4); }
  double head_in_time_s(int a, int b, DeviceGroup g) const override {
    return a == 0 ? unwaited(a, b, g) * frac(a, b, g, 5) : 0.0;
  }
  double after_first_wait_s(int a, int b, DeviceGroup g) const override {
    return waited_copy_time_s(a, b, g) > 0 ? kernels(a, b, g) * (1.0 - frac(a, b, g, 4)) + first_wait_s(a, b, g) : 0.0;
  }
  double tail_out_time_s(int a, int b, DeviceGroup g) const override {
    return b == num_kernels() - 1 ? (unwaited(a, b, g) - head_in_time_s(a, b, g)) * frac(a, b, g, 6) : 0.0;
  }
  // Half the instances: a third of the copies hold the kernels up.
  double waited_copy_time_s(int a, int b, DeviceGroup g) const override {
    return seed_ % 2 ? copy_time_s(a, b, g) / 3.0 : 0.0;
  }
  double output_bytes(int k) const override { return base_.output_bytes(k); }
  double transfer_time_s(int k, DeviceGroup f, DeviceGroup t) const override { return base_.transfer_time_s(k, f, t); }
  double transfer_out_s(int k, DeviceGroup f, DeviceGroup t) const override { return base_.transfer_out_s(k, f, t); }
  double transfer_in_s(int k, DeviceGroup f, DeviceGroup t) const override { return base_.transfer_in_s(k, f, t); }

 private:
  std::uint64_t hash(int a, int b, DeviceGroup g, std::uint64_t salt) const {
    std::uint64_t h = seed_ ^ (static_cast<std::uint64_t>(a) * 0x9E3779B97F4A7C15ull) ^
                      (static_cast<std::uint64_t>(b) << 20) ^ (static_cast<std::uint64_t>(g.kind) << 40) ^
                      (static_cast<std::uint64_t>(g.count) << 50) ^ (salt << 60);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
  }
  double frac(int a, int b, DeviceGroup g, std::uint64_t salt) const {
    return static_cast<double>(hash(a, b, g, salt) % 1000) / 1000.0;
  }
  // The host legs are copies the kernels do not wait for: together with the kernels and the
  // exchanges they make up the range's time, as in the runtime's model.
  double unwaited(int a, int b, DeviceGroup g) const { return copy_time_s(a, b, g) - waited_copy_time_s(a, b, g); }
  double kernels(int a, int b, DeviceGroup g) const {
    const double c = compute_time_s(a, b, g);
    return c < kInf ? c - copy_time_s(a, b, g) : 0.0;
  }
  double part(int a, int b, DeviceGroup g, std::uint64_t salt) const {
    if (seed_ % 4 < 2) return copy_time_s(a, b, g);
    double sum = 0.0;  // per kernel, so a longer range never has less in a direction
    for (int k = a; k <= b; ++k)
      sum += copy_time_s(k, k, g) * (0.2 + 0.8 * static_cast<double>(hash(k, k, g, salt) % 1000) / 1000.0);
    return std::min(sum, copy_time_s(a, b, g));
  }
  const CostModel& base_;
  std::uint64_t seed_;
};

// Devices per kind, in the system's kind order (SidedTransfers draws a time per group).
inline std::vector<int> kind_counts(const SystemSpec& system) {
  std::vector<int> counts;
  for (const auto& k : system.kinds) counts.push_back(k.count);
  return counts;
}

// An instance's model with sided hand-offs and copies that overlap compute (pair with
// SystemSpec::transfers = overlap); draws from rng as the two built one after the other.
struct OverlapModel {
  OverlapModel(const Instance& in, std::mt19937_64& rng) : sided(*in.model, rng, kind_counts(in.system)), copies(sided, rng()) {}
  SidedTransfers sided;
  CopiesInCompute copies;
};

}  // namespace dype::sched
