#include "scheduler/cost_model.h"

#include <algorithm>

#include "common/error.h"

namespace dype::sched {

void Footprint::add(const Footprint& o) {
  weights += o.weights;
  graph = std::max(graph, o.graph);
  activations = std::max(activations, o.activations);
}

Footprint kernel_footprint(const kernels::OpShape& shape, double input_bytes, double output_bytes, int c) {
  const double cd = std::max(c, 1);
  Footprint f;
  switch (shape.kind) {
    case kernels::OpKind::gemm:
      f.weights = 4.0 * static_cast<double>(shape.k * shape.n + shape.n);
      break;
    case kernels::OpKind::layer_norm:
      f.weights = 8.0 * static_cast<double>(shape.n);
      break;
    case kernels::OpKind::spmm:
      f.graph = (8.0 * static_cast<double>(shape.nnz) + 4.0 * static_cast<double>(shape.m + 1)) / cd;
      break;
    default:
      break;
  }
  const double in = shape.kind == kernels::OpKind::spmm ? input_bytes : input_bytes / cd;
  f.activations = in + output_bytes / cd;
  return f;
}

AdditiveCostModel::AdditiveCostModel(SystemSpec system, std::vector<double> output_bytes,
                                     std::vector<double> input_bytes,
                                     std::vector<std::vector<double>> kernel_time_s,
                                     double parallel_efficiency, std::vector<kernels::OpKind> ops)
    : system_(std::move(system)),
      out_bytes_(std::move(output_bytes)),
      in_bytes_(std::move(input_bytes)),
      efficiency_(parallel_efficiency) {
  const std::size_t n = out_bytes_.size();
  if (in_bytes_.size() != n || kernel_time_s.size() != n) {
    throw Error("AdditiveCostModel: bytes and kernel-time tables disagree on the kernel count");
  }
  if (!(efficiency_ > 0 && efficiency_ <= 1)) {
    throw InputError("AdditiveCostModel.parallel_efficiency", "must be in (0, 1]");
  }
  if (!ops.empty() && ops.size() != n) throw Error("AdditiveCostModel: ops table size != kernel count");
  gathered_prefix_.assign(n + 1, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    const bool gathers = ops.empty() || ops[k] == kernels::OpKind::spmm;
    gathered_prefix_[k + 1] = gathered_prefix_[k] + (gathers ? in_bytes_[k] : 0.0);
  }
  const std::size_t kinds = system_.kinds.size();
  prefix_.assign(kinds, std::vector<double>(n + 1, 0.0));
  unsupported_.assign(kinds, std::vector<int>(n + 1, 0));
  for (std::size_t t = 0; t < kinds; ++t) {
    for (std::size_t k = 0; k < n; ++k) {
      if (kernel_time_s[k].size() != kinds) throw Error("AdditiveCostModel: kernel-time row size != kinds");
      const double v = kernel_time_s[k][t];
      const bool ok = v < kInf && v >= 0;
      prefix_[t][k + 1] = prefix_[t][k] + (ok ? v : 0.0);
      unsupported_[t][k + 1] = unsupported_[t][k] + (ok ? 0 : 1);
    }
  }
}

AdditiveCostModel AdditiveCostModel::from_gflops(const SystemSpec& system, const Workload& workload,
                                                 double parallel_efficiency) {
  std::vector<double> out, in;
  std::vector<std::vector<double>> times;
  std::vector<kernels::OpKind> ops;
  for (const Kernel& k : workload.kernels) {
    ops.push_back(k.shape.kind);
    out.push_back(k.output_bytes);
    in.push_back(k.input_bytes);
    std::vector<double> row;
    for (const DeviceKindSpec& d : system.kinds) {
      const double g = d.gflops[static_cast<std::size_t>(k.shape.kind)];
      row.push_back(g > 0 ? k.flops / (g * 1e9) : kInf);
    }
    times.push_back(std::move(row));
  }
  AdditiveCostModel m(system, std::move(out), std::move(in), std::move(times), parallel_efficiency, std::move(ops));
  std::vector<kernels::OpShape> shapes;
  for (const Kernel& k : workload.kernels) shapes.push_back(k.shape);
  m.set_shapes(std::move(shapes));
  return m;
}

double AdditiveCostModel::host_input_s(DeviceGroup g) const {
  return in_bytes_.empty() ? 0.0 : system_.host_input_time_s(in_bytes_.front(), g.kind);
}

double AdditiveCostModel::host_output_s(DeviceGroup g) const {
  return out_bytes_.empty() ? 0.0 : system_.host_output_time_s(out_bytes_.back(), g.kind);
}

double AdditiveCostModel::compute_time_s(int first, int last, DeviceGroup g) const {
  if (unsupported_[g.kind][last + 1] != unsupported_[g.kind][first]) return kInf;
  // The request's input and answer over the NICs when the stage is on another host than the
  // coordinator (0 on one host).
  const double io = copy_time_s(first, last, g);
  const double one = prefix_[g.kind][last + 1] - prefix_[g.kind][first];
  if (g.count <= 1) return one + io;
  // Rows split over the devices (balanced by nnz for SpMM); the all-gathers before SpMMs (see
  // the class comment) run on every device's link at once.
  const DeviceKindSpec& kind = system_.kinds[g.kind];
  const double c = g.count;
  const double gathered = gathered_prefix_[last + 1] - gathered_prefix_[first];
  double exchange = 0.0;
  if (!kind.host && gathered > 0) {
    exchange = kind.p2p ? gathered * (c - 1) / c / kind.link_bw_bytes_per_s
                        : gathered / kind.link_bw_bytes_per_s;  // slice up, the rest down
  }
  return one / (c * efficiency_) + exchange + io;
}

void AdditiveCostModel::set_shapes(std::vector<kernels::OpShape> shapes) {
  if (!shapes.empty() && shapes.size() != out_bytes_.size()) throw Error("AdditiveCostModel: shapes size != kernel count");
  shapes_ = std::move(shapes);
}

void AdditiveCostModel::set_kernel_power(const std::vector<std::vector<double>>& watts) {
  energy_prefix_.clear();
  if (watts.empty()) return;
  if (watts.size() != out_bytes_.size()) throw Error("AdditiveCostModel: kernel power rows != kernel count");
  const std::size_t kinds = system_.kinds.size();
  energy_prefix_.assign(kinds, std::vector<double>(watts.size() + 1, 0.0));
  for (std::size_t t = 0; t < kinds; ++t) {
    for (std::size_t k = 0; k < watts.size(); ++k) {
      if (watts[k].size() != kinds) throw Error("AdditiveCostModel: kernel power row size != kinds");
      const double time = prefix_[t][k + 1] - prefix_[t][k];
      energy_prefix_[t][k + 1] = energy_prefix_[t][k] + time * std::max(watts[k][t], system_.kinds[t].power.idle_w);
    }
  }
}

double AdditiveCostModel::execute_w(int first, int last, DeviceGroup g) const {
  if (energy_prefix_.empty()) return -1.0;
  const double time = prefix_[g.kind][last + 1] - prefix_[g.kind][first];
  if (!(time > 0)) return -1.0;
  return (energy_prefix_[g.kind][last + 1] - energy_prefix_[g.kind][first]) / time;
}

Footprint AdditiveCostModel::footprint(int first, int last, DeviceGroup g) const {
  Footprint f;
  if (shapes_.empty()) return f;
  for (int k = first; k <= last; ++k) {
    const auto i = static_cast<std::size_t>(k);
    f.add(kernel_footprint(shapes_[i], in_bytes_[i], out_bytes_[i], g.count));
  }
  return f;
}

double AdditiveCostModel::transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const {
  return system_.transfer_time_s(out_bytes_[k], from, to);
}

TableCostModel::TableCostModel(std::vector<int> kind_counts, int num_kernels) : n_(num_kernels) {
  offset_.push_back(0);
  for (int c : kind_counts) offset_.push_back(offset_.back() + c);
  const auto kcs = static_cast<std::size_t>(offset_.back());
  const auto n = static_cast<std::size_t>(n_);
  compute_.assign(n * n * kcs, kInf);
  transfer_.assign(n * kcs * kcs, 0.0);
  bytes_.assign(n, 0.0);
}

double TableCostModel::compute_time_s(int first, int last, DeviceGroup g) const {
  return compute_[(static_cast<std::size_t>(first) * n_ + last) * num_kc() + kc(g)];
}

double TableCostModel::transfer_time_s(int k, DeviceGroup from, DeviceGroup to) const {
  return transfer_[(static_cast<std::size_t>(k) * num_kc() + kc(from)) * num_kc() + kc(to)];
}

void TableCostModel::set_compute(int first, int last, DeviceGroup g, double t) {
  compute_[(static_cast<std::size_t>(first) * n_ + last) * num_kc() + kc(g)] = t;
}

void TableCostModel::set_transfer(int k, DeviceGroup from, DeviceGroup to, double t) {
  transfer_[(static_cast<std::size_t>(k) * num_kc() + kc(from)) * num_kc() + kc(to)] = t;
}

}  // namespace dype::sched
