// What one pipeline stage does with a request: which rows each of its devices takes (partition),
// placing and preloading its graph rows, what the next stage needs of its output, and running its
// kernels (process) or handing the request to another host's stage (process_remote).
#include <algorithm>
#include <map>
#include <set>

#include <tbb/parallel_for.h>

#include "hw/kernel_launch.h"
#include "common/error.h"
#include "graph/partition.h"
#include "runtime/pipeline.h"
#include "runtime/pipeline_state.h"
#include "runtime/rows_needed.h"

namespace dype::rt {

using kernels::OpKind;

std::vector<std::int64_t> Pipeline::partition(StageState& st, const Request& r) {
  std::lock_guard lock(st.part_mu);
  const std::int64_t rows = r.rows();
  const std::int64_t c = std::min<std::int64_t>(static_cast<std::int64_t>(st.devs.size()), std::max<std::int64_t>(1, rows));
  const bool by_nnz = st.has_spmm && r.graph();
  if (by_nnz && st.part_graph == r.graph()->id && st.part_rows == rows) return st.part;
  if (!by_nnz && st.part_graph == 0 && st.part_rows == rows) return st.part;
  std::vector<std::int64_t> p(static_cast<std::size_t>(c) + 1, 0);
  p[c] = rows;
  if (by_nnz && !r.graph()->size_only()) {
    // graph/partition.h: whole rows, balanced by nnz (+1 per row so empty runs spread).
    const Graph& g = *r.graph();
    if (g.rows_per_node == 1) {
      kernels::CsrView<std::int32_t> a{g.nodes, g.nodes, g.indptr, g.indices, g.values};
      p = kernels::partition_rows_by_nnz(a, static_cast<int>(c), 1.0);
    } else {
      // Whole nodes (all of a node's CSR rows on one device), balanced by their nnz.
      std::vector<std::int32_t> per_node(static_cast<std::size_t>(g.nodes) + 1);
      for (std::int64_t i = 0; i <= g.nodes; ++i) per_node[static_cast<std::size_t>(i)] = g.indptr[static_cast<std::size_t>(i * g.rows_per_node)];
      kernels::CsrView<std::int32_t> a{g.nodes, g.nodes, per_node, g.indices, g.values};
      p = kernels::partition_rows_by_nnz(a, static_cast<int>(c), 1.0);
    }
    for (std::int64_t j = 1; j < c; ++j) p[j] = std::clamp<std::int64_t>(p[j], p[j - 1] + 1, rows - (c - j));
  } else if (by_nnz) {
    // Shape-only graph (indptr only): boundary j is the first row whose prefix reaches j/c.
    const auto& ip = r.graph()->indptr;
    const std::int64_t f = r.graph()->rows_per_node;
    const double total = static_cast<double>(ip.back());
    for (std::int64_t j = 1; j < c; ++j) {
      const auto target = static_cast<std::int64_t>(total * static_cast<double>(j) / static_cast<double>(c));
      auto it = std::lower_bound(ip.begin(), ip.end(), target);
      p[j] = std::clamp<std::int64_t>((it - ip.begin()) / f, p[j - 1] + 1, rows - (c - j));
    }
  } else {
    for (std::int64_t j = 1; j < c; ++j) p[j] = rows * j / c;
  }
  st.part = p;
  st.part_rows = rows;
  st.part_graph = by_nnz ? r.graph()->id : 0;
  return p;
}

void Pipeline::place_rows(DeviceState& ds, const Graph& g, std::int64_t r0, std::int64_t r1) {
  std::lock_guard lock(ds.slot->mu);
  const auto& held = ds.slot->rows;
  if (!held || held->graph_id != g.id || held->r0 != r0 || held->r1 != r1) ds.slot->rows = preload(*ds.dev, g, r0, r1);
  ds.graph = ds.slot->rows;
}

std::shared_ptr<Pipeline::GraphRows> Pipeline::preload(hw::Device& d, const Graph& g, std::int64_t r0, std::int64_t r1) {
  const bool so = g.size_only();
  if (so && !timing_only(d)) throw InputError(d.name(), "shape-only graph needs a timing-only device");
  // Nodes [r0, r1) are CSR rows [r0 f, r1 f) (f = 2 for SAGE's interleaved matrix).
  const std::int64_t f = g.rows_per_node, c0 = r0 * f, c1 = r1 * f;
  const std::int32_t base = g.indptr[c0];
  const std::int64_t nnz = g.indptr[c1] - base;
  std::vector<std::int32_t> local(static_cast<std::size_t>(c1 - c0 + 1));
  for (std::int64_t r = c0; r <= c1; ++r) local[r - c0] = g.indptr[r] - base;
  auto rows = std::make_shared<GraphRows>();
  GraphRows& ds = *rows;
  ds.indptr = d.allocate(local.size() * 4);
  ds.indices = d.allocate(static_cast<std::size_t>(nnz) * 4);
  ds.values = d.allocate(static_cast<std::size_t>(nnz) * 4);
  std::vector<hw::Event> after;
  if (d.info().time_source == hw::TimeSource::modelled)
    after.push_back({options_.preload_not_before_s, options_.preload_not_before_s, hw::TimeSource::modelled, 0});
  auto e1 = d.copy_from_host(*ds.indptr, bytes_or_size(local.data(), local.size() * 4, false), 0, after);
  auto e2 = d.copy_from_host(*ds.indices, bytes_or_size(so ? nullptr : g.indices.data() + base, static_cast<std::size_t>(nnz) * 4, so), 0, after);
  auto e3 = d.copy_from_host(*ds.values, bytes_or_size(so ? nullptr : g.values.data() + base, static_cast<std::size_t>(nnz) * 4, so), 0, after);
  for (const auto& e : {e1, e2, e3}) {
    if (e.source == hw::TimeSource::modelled) raise_preload_end(e.end_s);
  }
  ds.graph_id = g.id;
  ds.r0 = r0;
  ds.r1 = r1;
  ds.nnz = nnz;
  return rows;
}

void Pipeline::raise_preload_end(double t) {
  double cur = preload_end_s_.load(std::memory_order_relaxed);
  while (t > cur && !preload_end_s_.compare_exchange_weak(cur, t, std::memory_order_relaxed)) {
  }
}

std::vector<Need> Pipeline::needs_for(const StageState& st, const std::vector<std::int64_t>& part, int k,
                                      const Request& req, const Activation* held) const {
  const std::size_t c = part.size() - 1;
  const Step& step = model_.step(k);
  std::vector<Need> needs(c);
  for (std::size_t j = 0; j < c; ++j) {
    Need& n = needs[j];
    n.device = st.devs[j].dev;
    n.own_lo = part[j];
    n.own_hi = part[j + 1];
    const RowRange need = rows_needed(step.op, {part[j], part[j + 1]}, req.rows(), req.window());
    n.lo = need.lo;
    n.hi = need.hi;
    // Row-local kernels keep whatever valid (wider) rows the device already holds.
    if (row_local(step.op) && held && held->shards.size() == c && held->shards[j].device == n.device &&
        held->shards[j].own_lo == n.own_lo && held->shards[j].own_hi == n.own_hi) {
      n.lo = held->shards[j].valid_lo;
      n.hi = held->shards[j].valid_hi;
    }
  }
  return needs;
}

std::vector<Need> Pipeline::next_stage_needs(StageState& st, const Request& req) {
  StageState& next = *stages_[static_cast<std::size_t>(st.index) + 1];
  // The next stage's devices receive this request only once they have been given everything
  // of the previous one (a transfer occupies both ends and never cuts into their work), so each
  // device sees its operations in one fixed order and the modelled timeline does not depend on
  // thread timing. The next stage never waits on this one, so this cannot deadlock.
  {
    std::unique_lock lock(next.issue_mu);
    next.issue_cv.wait(lock, [&] { return next.issued + 1 >= st.taken; });
  }
  return needs_for(next, partition(next, req), next.spec.first, req, nullptr);
}

void Pipeline::process_remote(StageState& st, Work& w, TransferCounters& tc) {
  const Request& req = *w.job.request;
  std::span<const HostTensor> in = w.host;
  if (st.index == 0)
    in = w.job.inputs.empty() ? std::span<const HostTensor>(&req.input(), 1) : std::span<const HostTensor>(w.job.inputs);
  std::vector<HostTensor> out;
  try {
    out = st.spec.remote->run(req, options_.epoch, w.job.seq, st.spec.first, st.spec.last, in);
  } catch (const hw::DeviceError& e) {
    // Named by the plan's stand-in for the other host's device when there is one, so the engine
    // leaves that device (and what fails with it, EngineOptions::failure_domain) out of re-plans.
    if (st.spec.devices.empty()) throw;
    throw hw::DeviceError(st.spec.devices.front()->name(), std::string("on ") + st.names + ": " + e.what());
  }
  w.host.clear();
  const auto expected = static_cast<std::size_t>(model_.step(st.spec.last).outputs());
  if (out.size() != expected)
    throw hw::DeviceError(st.names, "answered " + std::to_string(out.size()) + " tensors for kernel " +
                                        model_.step(st.spec.last).name + ", which hands on " + std::to_string(expected));
  if (st.index + 1 == static_cast<int>(stages_.size())) {
    if (spec_.last_kernel + 1 < model_.num_kernels()) {
      w.c.tensors = std::move(out);
    } else {
      w.c.output = std::move(out[0]);
    }
  } else if (stages_[static_cast<std::size_t>(st.index) + 1]->spec.remote) {
    w.host = std::move(out);
  } else {
    w.act = xfer_.upload(std::span<const HostTensor>(out), next_stage_needs(st, req), 0.0, tc);
  }
  // The remote host's devices keep their own (modelled) clocks; this host measures only.
  w.c.stage_modelled_s.push_back(-1);
}

void Pipeline::process(StageState& st, Work& w, TransferCounters& tc) {
  if (st.spec.remote) {
    process_remote(st, w, tc);
    return;
  }
  const Request& req = *w.job.request;
  const auto part = partition(st, req);
  const std::size_t c = part.size() - 1;
  const std::int64_t rows = req.rows();
  double mstart = 1e300, mend = -1.0;
  auto note = [&](const hw::Event& e) {
    if (e.source != hw::TimeSource::modelled) return;
    mstart = std::min(mstart, e.start_s);
    mend = std::max(mend, e.end_s);
  };
  // A new graph (or new row split) since the last request: place this device's rows first.
  if (st.has_spmm) {
    for (std::size_t j = 0; j < c; ++j) place_rows(st.devs[j], *req.graph(), part[j], part[j + 1]);
  }
  for (int k = st.spec.first; k <= st.spec.last; ++k) {
    const Step& step = model_.step(k);
    const std::vector<Need> needs = needs_for(st, part, k, req, &w.act);
    if (k == st.spec.first && st.index == 0) {
      w.act = w.job.inputs.empty() ? xfer_.upload_input(req, needs, w.job.not_before_s, tc)
                                   : xfer_.upload(std::span<const HostTensor>(w.job.inputs), needs,
                                                  w.job.not_before_s, tc);
    } else if (!TransferEngine::satisfied(w.act, needs)) {
      w.act = xfer_.redistribute(std::move(w.act), needs, tc);
    }
    // Run the kernel on every device of the stage (each device from its own task).
    Activation next;
    next.rows = rows;
    next.size_only = w.act.size_only;
    for (int o = 0; o < step.outputs(); ++o) next.cols.push_back(step.output_cols(o));
    next.shards.resize(c);
    std::vector<std::vector<hw::Event>> events(c);
    std::vector<std::vector<KernelTiming>> timings(c);
    const bool timed = timed_now();
    auto launch = [&](std::size_t j, hw::Device& d, const hw::KernelLaunch& l) {
      const hw::Event e = d.launch(l);
      events[j].push_back(e);
      if (timed)
        timings[j].push_back({k, d.name(), l.shape, e.end_s - e.start_s, e.source == hw::TimeSource::modelled});
    };
    auto run = [&](std::size_t j) {
      DeviceState& ds = st.devs[j];
      hw::Device& d = *ds.dev;
      Shard& in = w.act.shards[j];
      Shard& out = next.shards[j];
      out.device = &d;
      out.own_lo = in.own_lo;
      out.own_hi = in.own_hi;
      if (step.op == OpKind::spmm) {
        out.held_lo = out.valid_lo = in.own_lo;
        out.held_hi = out.valid_hi = in.own_hi;
        const std::int64_t m = out.held_rows();
        hw::BufferPtr y = d.allocate(static_cast<std::size_t>(m * step.out_cols) * 4);
        // m nodes are m f CSR rows of in_cols: the same bytes as m rows of out_cols = f in_cols.
        const GraphRows& g = *ds.graph;
        launch(j, d, hw::KernelLaunch::spmm(*g.indptr, *g.indices, *g.values, *in.tensors[0], *y,
                                            m * req.graph()->rows_per_node, rows, step.in_cols, g.nnz, 4,
                                            req.graph()->degree_skew));
        out.tensors.push_back(std::move(y));
      } else if (step.op == OpKind::window_attention) {
        out.held_lo = in.held_lo;
        out.held_hi = in.held_hi;
        // Rows near a cut edge saw a truncated band; only the owned rows are right (the halo
        // covers window / 2 on each side of them).
        out.valid_lo = in.own_lo;
        out.valid_hi = in.own_hi;
        const std::int64_t m = out.held_rows();
        hw::BufferPtr y = d.allocate(static_cast<std::size_t>(m * step.out_cols) * 4);
        launch(j, d, hw::KernelLaunch::window_attention(*in.tensors[0], *in.tensors[1], *in.tensors[2], *y, m,
                                                        model_.spec().heads, model_.spec().d_model / model_.spec().heads,
                                                        req.window()));
        out.tensors.push_back(std::move(y));
      } else {
        out.held_lo = in.held_lo;
        out.held_hi = in.held_hi;
        out.valid_lo = in.valid_lo;
        out.valid_hi = in.valid_hi;
        const std::int64_t m = out.held_rows();
        const auto& wb = ds.weights[static_cast<std::size_t>(k - st.spec.first)];
        if (step.op == OpKind::layer_norm) {
          hw::BufferPtr y = d.allocate(static_cast<std::size_t>(m * step.out_cols) * 4);
          launch(j, d, hw::KernelLaunch::layer_norm(*in.tensors[0], *wb[0], *wb[1], *y, m, step.out_cols,
                                                    model_.spec().layer_norm_eps));
          out.tensors.push_back(std::move(y));
        } else {
          const hw::Buffer* residual = step.residual == Residual::add ? in.tensors.back().get() : nullptr;
          for (int o = 0; o < step.launches(); ++o) {
            hw::BufferPtr y = d.allocate(static_cast<std::size_t>(m * step.out_cols) * 4);
            launch(j, d, hw::KernelLaunch::gemm(*in.tensors[0], *wb[2 * o], wb[2 * o + 1].get(), *y, m, step.in_cols,
                                                step.out_cols, step.epilogue, residual));
            out.tensors.push_back(std::move(y));
          }
        }
      }
      // The skip connection rides along as the last tensor (its rows are the input's, which
      // cover the output's valid rows).
      if (step.residual == Residual::save) out.tensors.push_back(std::move(in.tensors.front()));
      if (step.residual == Residual::pass) out.tensors.push_back(std::move(in.tensors.back()));
    };
    if (c == 1) {
      run(0);
    } else {
      tbb::parallel_for(std::size_t{0}, c, [&](std::size_t j) { run(j); });
    }
    for (const auto& ev : events)
      for (const auto& e : ev) note(e);
    for (auto& t : timings) w.timings.insert(w.timings.end(), t.begin(), t.end());
    w.act = std::move(next);
  }
  double end = mend;
  if (st.index + 1 == static_cast<int>(stages_.size())) {
    if (spec_.last_kernel + 1 < model_.num_kernels()) {
      w.c.tensors = xfer_.download_all(w.act, tc, end);
    } else {
      w.c.output = xfer_.download(w.act, tc, end, w.job.request->answer_memory());
    }
    w.act = Activation{};
  } else if (stages_[static_cast<std::size_t>(st.index) + 1]->spec.remote) {
    w.host = xfer_.download_all(w.act, tc, end);
    w.act = Activation{};
  } else {
    // Hand the output to the next stage now, from this worker: the transfer occupies this stage
    // right after its compute (T_s = X_s + C_s + X_{s+1}, the paper's conflict-free order), so
    // the virtual timeline does not depend on when the next stage's thread gets to it.
    const std::vector<Need> needs = next_stage_needs(st, req);
    if (!TransferEngine::satisfied(w.act, needs)) w.act = xfer_.redistribute(std::move(w.act), needs, tc);
  }
  if (mend >= 0) {
    w.c.stage_modelled_s.push_back(mend - mstart);
    w.c.modelled_end_s = end;
  } else {
    w.c.stage_modelled_s.push_back(-1);
  }
}

}  // namespace dype::rt
