#include "runtime/planning/runtime_cost_model.h"

#include <algorithm>

#include "hw/device_profile.h"
#include "hw/kernel_timing_model.h"
#include "hw/topology.h"
#include "common/error.h"
#include "runtime/rows_needed.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"

namespace dype::rt {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Kernel k's shape on one device of a c-device stage (even row split; an SpMM's shard keeps every
// column of A and 1/c of its nnz; a window attention's shard carries a halo of window / 2 rows).
// The rows the widest shard of a c-device stage needs of kernel `op`'s input (rows_needed.h), over
// the pipeline's own split of rows that carry no graph (shard j owns [rows j / c, rows (j + 1) / c),
// Pipeline::partition). The end shards' halos are clipped by the sequence: with two devices each
// needs one halo, not two (assuming two had over-predicted window attention on 2 GPUs by +29%).
std::int64_t widest_need_rows(kernels::OpKind op, std::int64_t rows, std::int64_t window, int c) {
  std::int64_t widest = 0;
  for (int j = 0; j < c; ++j) {
    const RowRange own{rows * j / c, rows * (j + 1) / c};
    widest = std::max(widest, rows_needed(op, own, rows, window).count());
  }
  return widest;
}

kernels::OpShape shard_shape(kernels::OpShape s, std::int64_t rows, std::int64_t window, int c) {
  if (c <= 1) return s;
  const std::int64_t own = ceil_div(rows, c);
  switch (s.kind) {
    case kernels::OpKind::spmm:
      s.m = own;  // its output rows; it reads every row (the whole graph's columns)
      s.nnz = ceil_div(s.nnz, c);
      break;
    case kernels::OpKind::window_attention:
      s.m = s.seq_len = widest_need_rows(s.kind, rows, window, c);
      break;
    default:
      s.m = own;
      break;
  }
  return s;
}

}  // namespace

RuntimeCostModel::RuntimeCostModel(const Model& model, const hw::System& system, const sched::SystemSpec& spec,
                                   const std::set<std::string>& excluded, const Characteristics& c,
                                   const KernelTimeFn& kernel_time, const FpgaImagePlan* images)
    : model_(model), topo_(system.topology()), overlap_(system.config().overlap_transfers), c_(c),
      n_(model.num_kernels()) {
  rows_ = model.is_gnn() ? c.nodes : c.seq_len;
  const auto shapes = model.kernel_shapes(c);
  shapes_ = shapes;
  const double input_bytes = 4.0 * static_cast<double>(rows_) *
                             static_cast<double>(model.is_gnn() ? model.spec().in_features : model.spec().d_model);
  for (int k = 0; k < n_; ++k) {
    out_.push_back(model.output_bytes(k, c));
    in_.push_back(k == 0 ? input_bytes : model.output_bytes(k - 1, c));
    in_tensors_.push_back(k == 0 ? 1 : model.step(k - 1).outputs());
  }
  const std::vector<PlanningKind> kinds = planning_kinds(system, excluded, images);
  for (const auto& kind : spec.kinds) {
    offset_.push_back(groups_.size());
    kind_host_.push_back(kind.host_index);
    const auto pk = std::find_if(kinds.begin(), kinds.end(), [&](const PlanningKind& k) { return k.name == kind.name; });
    std::vector<hw::Device*> ds;
    const hw::Bitstream* manifest = nullptr;
    const hw::DeviceProfile* board = nullptr;
    if (pk != kinds.end()) {
      ds = pk->devices;
      manifest = pk->manifest;
      board = pk->board;
    }
    // One kernel on the kind's first device, or from the manifest of the image it would hold.
    auto time_of = [&](const kernels::OpShape& sh) {
      if (!manifest) return kernel_time(*ds.front(), sh);
      if (!board || !hw::timing::model_supports(*board, manifest, sh.kind)) return sched::kInf;
      return hw::timing::modelled_time_s(*board, manifest, sh, ds.front()->name());
    };
    auto power_of = [&](kernels::OpKind op) {
      if (!manifest) return ds.front()->info().power.execute_w_for(op);
      const hw::BitstreamKernel* bk = manifest->find(op);
      return ds.front()->info().power.idle_w + (bk ? bk->dynamic_w : 0.0);
    };
    kind_topo_.emplace_back();
    for (hw::Device* d : ds) kind_topo_.back().push_back(d->topology_index());
    for (int cnt = 1; cnt <= kind.count; ++cnt) {
      Group g;
      for (int j = 0; j < cnt && j < static_cast<int>(ds.size()); ++j) g.topo.push_back(ds[static_cast<std::size_t>(j)]->topology_index());
      for (int k = 0; k < n_; ++k) {
        const Step& step = model.step(k);
        double t = sched::kInf;
        if (!ds.empty()) {
          kernels::OpShape sh = shard_shape(shapes[static_cast<std::size_t>(k)], rows_, c.window, cnt);
          // A QKV step launches one GEMM per output.
          if (step.launches() > 1) sh.n = step.out_cols;
          t = time_of(sh);
          if (t < sched::kInf) t *= step.launches();
        }
        g.kernel_s.push_back(t);
        g.execute_w.push_back(ds.empty() ? 0.0 : power_of(step.op));
        // The exchange before k inside the stage (the engine's chosen route, until every device
        // holds its rows); none when no device needs more rows than it owns.
        const auto route = k > 0 ? routed(k, g.topo, g.topo) : std::nullopt;
        g.exchange_s.push_back(route ? route->span_s : 0.0);
        g.exchange_in_s.push_back(route ? route->inbound_s : 0.0);
        g.exchange_out_s.push_back(route ? route->outbound_s : 0.0);
      }
      g.upload_s = down_s(g, need_bytes(0, cnt), 1) + topo_.nic_leg_s(kind.host_index, in_.front());
      g.download_s = up_s(g, out_.back() / cnt, 1) + topo_.nic_leg_s(kind.host_index, out_.back());
      groups_.push_back(std::move(g));
    }
  }
}

const RuntimeCostModel::Group& RuntimeCostModel::group(sched::DeviceGroup g) const {
  return groups_.at(offset_.at(static_cast<std::size_t>(g.kind)) + static_cast<std::size_t>(g.count - 1));
}

double RuntimeCostModel::need_bytes(int k, int c) const {
  const double all = in_[static_cast<std::size_t>(k)];
  if (c <= 1 || rows_ <= 0) return all;
  const kernels::OpKind op = model_.step(k).op;
  if (op == kernels::OpKind::spmm) return all;  // every row (rows_needed.h)
  const auto rows = widest_need_rows(op, rows_, c_.window, c);
  return all * static_cast<double>(rows) / static_cast<double>(rows_);
}

// Devices -> host memory, every device of the group at once (each on its own link).
double RuntimeCostModel::up_s(const Group& g, double bytes, int tensors) const {
  double t = 0.0;
  const auto per = static_cast<std::size_t>(bytes / std::max(1, tensors));
  for (int d : g.topo) {
    if (d < 0) continue;
    t = std::max(t, tensors * topo_.estimate_to_host(std::span<const int>(&d, 1), per).time_s);
  }
  return t;
}

double RuntimeCostModel::down_s(const Group& g, double bytes, int tensors) const {
  double t = 0.0;
  const auto per = static_cast<std::size_t>(bytes / std::max(1, tensors));
  for (int d : g.topo) {
    if (d < 0) continue;
    t = std::max(t, tensors * topo_.estimate_host_to(std::span<const int>(&d, 1), per).time_s);
  }
  return t;
}

double RuntimeCostModel::compute_time_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double t = 0.0;
  for (int k = first; k <= last; ++k) {
    const double kt = g.kernel_s[static_cast<std::size_t>(k)];
    if (!(kt < sched::kInf)) return sched::kInf;
    t += kt;
    if (k > first) t += g.exchange_s[static_cast<std::size_t>(k)];
  }
  if (first == 0) t += g.upload_s;
  if (last == n_ - 1) t += g.download_s;
  return t;
}

double RuntimeCostModel::waited_copy_time_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double t = 0.0;
  for (int k = first + 1; k <= last; ++k) t += g.exchange_s[static_cast<std::size_t>(k)];
  return t;
}

double RuntimeCostModel::copy_time_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  return waited_copy_time_s(first, last, gr) + (first == 0 ? g.upload_s : 0.0) + (last == n_ - 1 ? g.download_s : 0.0);
}

double RuntimeCostModel::copy_in_time_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double t = first == 0 ? g.upload_s : 0.0;
  for (int k = first + 1; k <= last; ++k) t += g.exchange_in_s[static_cast<std::size_t>(k)];
  return t;
}

double RuntimeCostModel::copy_out_time_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double t = last == n_ - 1 ? g.download_s : 0.0;
  for (int k = first + 1; k <= last; ++k) t += g.exchange_out_s[static_cast<std::size_t>(k)];
  return t;
}

double RuntimeCostModel::after_first_wait_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double t = 0.0;
  bool waiting = false;
  for (int k = first + 1; k <= last; ++k) {
    const auto i = static_cast<std::size_t>(k);
    waiting = waiting || g.exchange_s[i] > 0;
    if (waiting) t += g.exchange_s[i] + g.kernel_s[i];
  }
  return t;
}

double RuntimeCostModel::first_wait_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  for (int k = first + 1; k <= last; ++k)
    if (g.exchange_s[static_cast<std::size_t>(k)] > 0) return g.exchange_s[static_cast<std::size_t>(k)];
  return 0.0;
}

double RuntimeCostModel::head_kernels_s(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double t = g.kernel_s[static_cast<std::size_t>(first)];
  for (int k = first + 1; k <= last && !(g.exchange_s[static_cast<std::size_t>(k)] > 0); ++k)
    t += g.kernel_s[static_cast<std::size_t>(k)];
  return t;
}

double RuntimeCostModel::head_in_time_s(int first, int last, sched::DeviceGroup gr) const {
  (void)last;
  return first == 0 ? group(gr).upload_s : 0.0;
}

double RuntimeCostModel::tail_out_time_s(int first, int last, sched::DeviceGroup gr) const {
  (void)first;
  return last == n_ - 1 ? group(gr).download_s : 0.0;
}

double RuntimeCostModel::execute_w(int first, int last, sched::DeviceGroup gr) const {
  const Group& g = group(gr);
  double energy = 0.0, time = 0.0;
  for (int k = first; k <= last; ++k) {
    const auto i = static_cast<std::size_t>(k);
    if (!(g.kernel_s[i] < sched::kInf)) return -1.0;
    energy += g.kernel_s[i] * g.execute_w[i];
    time += g.kernel_s[i];
  }
  return time > 0 ? energy / time : -1.0;
}

sched::Footprint RuntimeCostModel::footprint(int first, int last, sched::DeviceGroup g) const {
  sched::Footprint f;
  for (int k = first; k <= last; ++k) {
    const auto i = static_cast<std::size_t>(k);
    f.add(sched::kernel_footprint(shapes_[i], in_[i], out_[i], g.count));
  }
  return f;
}

double RuntimeCostModel::transfer_time_s(int k, sched::DeviceGroup from, sched::DeviceGroup to) const {
  const Handoff h = handoff(k, from, to);
  return std::max(h.out_s, h.in_s);
}

double RuntimeCostModel::transfer_out_s(int k, sched::DeviceGroup from, sched::DeviceGroup to) const {
  return handoff(k, from, to).out_s;
}

double RuntimeCostModel::transfer_in_s(int k, sched::DeviceGroup from, sched::DeviceGroup to) const {
  return handoff(k, from, to).in_s;
}

sched::CostModel::Sides RuntimeCostModel::transfer_sides(int k, sched::DeviceGroup from, sched::DeviceGroup to) const {
  const Handoff h = handoff(k, from, to);
  return {h.out_s, h.in_s};
}

std::optional<rt::RouteCost> RuntimeCostModel::routed(int k, const std::vector<int>& from, const std::vector<int>& to) const {
  const kernels::OpKind op = model_.step(k).op;
  if (row_local(op) || rows_ <= 0 || from.empty() || to.empty()) return std::nullopt;
  // The pipeline's even row split (Pipeline::partition; SpMM stages split by nnz, modelled as even).
  auto own = [&](std::size_t j, std::size_t c) {
    const auto n = static_cast<std::int64_t>(c), i = static_cast<std::int64_t>(j);
    return RowRange{rows_ * i / n, rows_ * (i + 1) / n};
  };
  std::vector<RouteEnd> src, dst;
  bool wide = false;
  for (std::size_t j = 0; j < from.size(); ++j) src.push_back({from[j], own(j, from.size())});
  for (std::size_t i = 0; i < to.size(); ++i) {
    const RowRange o = own(i, to.size());
    const RowRange need = rows_needed(op, o, rows_, c_.window);
    wide |= need.lo < o.lo || need.hi > o.hi;
    dst.push_back({to[i], need});
  }
  if (!wide) return std::nullopt;
  const double row_bytes = in_[static_cast<std::size_t>(k)] / static_cast<double>(rows_);
  return plan_route(topo_, src, dst, row_bytes, in_tensors_[static_cast<std::size_t>(k)],
                    overlap_ ? CopyHolds::direction_engines : CopyHolds::devices).chosen();
}

RuntimeCostModel::Handoff RuntimeCostModel::handoff(int k, sched::DeviceGroup from, sched::DeviceGroup to) const {
  const int host_a = kind_host_.at(static_cast<std::size_t>(from.kind)), host_b = kind_host_.at(static_cast<std::size_t>(to.kind));
  if (host_a > 0 || host_b > 0) {
    // Through host memory and over the NICs through this machine (a remote stage's link relays
    // both ways, its stage waiting while it does): the sender's up leg and its host's NIC leg,
    // then the receiver's host's NIC leg and its down leg. The coordinator's own legs are free.
    const double bytes = out_[static_cast<std::size_t>(k)];
    const int nt = model_.step(k).outputs();
    return {up_s(group(from), bytes / from.count, nt) + topo_.nic_leg_s(host_a, bytes),
            topo_.nic_leg_s(host_b, bytes) + down_s(group(to), need_bytes(k + 1, to.count), nt)};
  }
  const Group& a = group(from);
  Group b_other;
  if (from.kind == to.kind) {
    // Same kind: the next stage gets the next devices of that kind (to_pipeline_spec's order).
    const auto& all = kind_topo_.at(static_cast<std::size_t>(to.kind));
    for (int j = from.count; j < from.count + to.count && j < static_cast<int>(all.size()); ++j)
      b_other.topo.push_back(all[static_cast<std::size_t>(j)]);
  }
  const Group& b = from.kind == to.kind ? b_other : group(to);
  const double bytes = out_[static_cast<std::size_t>(k)];
  const int nt = model_.step(k).outputs();
  const kernels::OpKind next = model_.step(k + 1).op;
  const bool next_row_local = row_local(next);
  // Shard-to-shard peer copies: both sides hold the same rows (1 -> 1, or equal counts with the
  // same even split: models without an SpMM, whose stages split by nnz instead).
  bool has_spmm = false;
  for (const Step& s : model_.steps()) has_spmm |= s.op == kernels::OpKind::spmm;
  // Needs wider than the rows owned (an SpMM's every row, a halo): the route the engine picks.
  if (const auto r = routed(k + 1, a.topo, b.topo)) return {r->senders_s, r->receivers_s};
  if (from.count == 1 && to.count == 1) {
    // The destination needs the whole tensor, which the source holds: one peer copy.
    Handoff h;
    const auto per = static_cast<std::size_t>(bytes / nt);
    for (std::size_t j = 0; j < b.topo.size() && !a.topo.empty(); ++j) {
      const int s = a.topo[0], d = b.topo[j];
      if (s < 0 || d < 0) continue;
      const double c = nt * topo_.estimate(std::span<const int>(&s, 1), std::span<const int>(&d, 1), per).time_s;
      h.out_s += c;
      h.in_s = std::max(h.in_s, c);
    }
    return h;
  }
  if (from.count == to.count && next_row_local && !has_spmm) {
    double t = 0.0;
    const auto per = static_cast<std::size_t>(bytes / from.count / nt);
    for (std::size_t j = 0; j < a.topo.size() && j < b.topo.size(); ++j) {
      const int s = a.topo[j], d = b.topo[j];
      if (s < 0 || d < 0) continue;
      t = std::max(t, nt * topo_.estimate(std::span<const int>(&s, 1), std::span<const int>(&d, 1), per).time_s);
    }
    return {t, t};
  }
  // Through host memory: the sources' up leg, then the destinations' down leg. With equal counts
  // the two stages' row splits may still coincide (both by nnz, or a shape-only graph whose nnz
  // split is even), and the transfer engine then copies shard to shard through host memory, a
  // copy that occupies both ends for its whole time: charge both sides the longer leg.
  const double up = up_s(a, bytes / from.count, nt), down = down_s(b, need_bytes(k + 1, to.count), nt);
  if (from.count == to.count) return {std::max(up, down), std::max(up, down)};
  return {up, down};
}

}  // namespace dype::rt
