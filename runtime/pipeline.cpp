#include "runtime/pipeline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <set>

#include <tbb/parallel_for.h>

#include "hw/kernel_launch.h"
#include "kernels/error.h"
#include "kernels/graph/partition.h"
#include "runtime/rows_needed.h"

namespace dype::rt {

using kernels::OpKind;

namespace {

double wall_now_s() { return hw::now_s(); }

alignas(64) std::byte g_sink[64];

std::span<const std::byte> bytes_or_size(const void* data, std::size_t bytes, bool size_only) {
  if (size_only || data == nullptr) return {g_sink, bytes};
  return {static_cast<const std::byte*>(data), bytes};
}

std::string join_names(const std::vector<hw::Device*>& ds) {
  std::string s;
  for (auto* d : ds) {
    if (!s.empty()) s += "+";
    s += d->name();
  }
  return s;
}

}  // namespace

std::string describe(const PipelineSpec& spec) {
  std::string s;
  for (const auto& st : spec.stages) {
    if (!s.empty()) s += " | ";
    s += std::to_string(st.first) + "-" + std::to_string(st.last) + ":" + (st.remote ? st.remote->where() : join_names(st.devices));
  }
  return s;
}

// A device's slice of a graph: rows [r0, r1) in CSR.
struct Pipeline::GraphRows {
  std::uint64_t graph_id = 0;
  std::int64_t r0 = 0, r1 = 0, nnz = 0;
  hw::BufferPtr indptr, indices, values;
};

// The rows a device holds, shared by its stages of every round: a stage takes a reference for the
// request it runs, so another round's stage may place a new graph meanwhile.
struct Pipeline::GraphSlot {
  std::mutex mu;
  std::shared_ptr<GraphRows> rows;
};

struct Pipeline::DeviceState {
  hw::Device* dev = nullptr;
  std::vector<std::vector<hw::BufferPtr>> weights;  // [step - first] -> W, bias (x3 for qkv)
  std::shared_ptr<GraphSlot> slot;
  std::shared_ptr<GraphRows> graph;  // the rows this stage's current request uses
};

struct Pipeline::StageState {
  int index = 0;
  PipelineStage spec;
  std::vector<DeviceState> devs;
  bool has_spmm = false;
  std::string names;
  double execute_w = 0.0;  // its devices' execute power for its kernels (RequestEvent)
  // Requests this stage's worker has taken (worker only) and has issued every operation of,
  // its outgoing transfer included (read by the stage before it, under issue_mu).
  std::uint64_t taken = 0;
  std::mutex issue_mu;
  std::condition_variable issue_cv;
  std::uint64_t issued = 0;
  std::mutex part_mu;  // the row split cache: read by this stage and by the one before it
  std::uint64_t part_graph = 0;
  std::int64_t part_rows = -1;
  std::vector<std::int64_t> part;
  mutable std::mutex mu;  // guards stats and dead
  StageStats stats;
  double start_wall_s = 0.0;
  double end_wall_s = -1.0;
  std::string dead_device, dead_reason;
  double depth_sum = 0.0;
};

struct Pipeline::Work {
  Job job;
  Activation act;
  std::vector<HostTensor> host;  // the activation in host memory, on its way to or from a remote stage
  Completion c;
  bool failed = false;
  std::vector<KernelTiming> timings;  // this stage's launches (only when observers listen)
};

Pipeline::Pipeline(const Model& model, PipelineSpec spec, PipelineOptions options)
    : model_(model), spec_(std::move(spec)), options_(std::move(options)) {
  const double t0 = wall_now_s();
  for (const Observer* o : options_.observers) timed_ = timed_ || o->wants_kernel_timings();
  if (spec_.stages.empty()) throw InputError("pipeline", "has no stages");
  if (spec_.rounds < 1 || spec_.stages.size() % static_cast<std::size_t>(spec_.rounds) != 0)
    throw InputError("pipeline.rounds", std::to_string(spec_.rounds) + " rounds do not divide " +
                                            std::to_string(spec_.stages.size()) + " stages");
  const auto per_round = static_cast<std::size_t>(spec_.stages_per_round());
  if (spec_.last_kernel < 0) spec_.last_kernel = model_.num_kernels() - 1;
  if (spec_.first_kernel < 0 || spec_.first_kernel > spec_.last_kernel || spec_.last_kernel >= model_.num_kernels())
    throw InputError("pipeline.first_kernel", "kernels [" + std::to_string(spec_.first_kernel) + ", " +
                                                  std::to_string(spec_.last_kernel) + "] are not a part of the model's " +
                                                  std::to_string(model_.num_kernels()));
  std::set<const hw::Device*> used;
  int expect = spec_.first_kernel;
  for (std::size_t s = 0; s < spec_.stages.size(); ++s) {
    const auto& st = spec_.stages[s];
    const std::string where = "pipeline.stages[" + std::to_string(s) + "]";
    if (st.first != expect || st.last < st.first || st.last > spec_.last_kernel)
      throw InputError(where, "kernels [" + std::to_string(st.first) + ", " + std::to_string(st.last) +
                                  "] do not continue the chain at " + std::to_string(expect));
    expect = st.last + 1;
    if (st.remote) {
      // Its devices, when listed, are the plan's stand-ins for the other host's (never used here).
      if (spec_.rounds > 1) throw InputError(where, "a recurrent pipeline cannot have a remote stage");
      continue;
    }
    if (st.devices.empty()) throw InputError(where, "has no devices");
    if (s >= per_round && st.devices != spec_.stages[s % per_round].devices)
      throw InputError(where, "a recurrent pipeline's stage runs on its round-0 stage's devices");
    for (hw::Device* d : st.devices) {
      if (!d) throw InputError(where, "null device");
      if (s < per_round && !used.insert(d).second) throw InputError(where, "device " + d->name() + " serves two stages");
      for (int k = st.first; k <= st.last; ++k) {
        if (!d->supports(model_.step(k).op))
          throw InputError(where, "device " + d->name() + " cannot run " + model_.step(k).name + " (" +
                                      std::string(kernels::to_string(model_.step(k).op)) + ")");
      }
    }
  }
  if (expect != spec_.last_kernel + 1) throw InputError("pipeline", "stages end before the last kernel");
  max_in_flight_ = options_.max_in_flight;
  if (max_in_flight_ == 0 && spec_.rounds > 1) max_in_flight_ = 2 * per_round + 2;
  std::map<const hw::Device*, std::shared_ptr<GraphSlot>> slots;  // one per device

  for (std::size_t s = 0; s < spec_.stages.size(); ++s) {
    auto st = std::make_unique<StageState>();
    st->index = static_cast<int>(s);
    st->spec = spec_.stages[s];
    st->names = st->spec.remote ? st->spec.remote->where() : join_names(st->spec.devices);
    st->stats.devices = st->names;
    st->stats.predicted_s = st->spec.predicted_s;
    for (int k = st->spec.first; k <= st->spec.last; ++k) st->has_spmm |= model_.step(k).op == OpKind::spmm;
    for (hw::Device* d : st->spec.remote ? std::vector<hw::Device*>{} : st->spec.devices) {
      // Per device: its highest execute power over the stage's kernels.
      double w = 0.0;
      for (int k = st->spec.first; k <= st->spec.last; ++k) w = std::max(w, d->info().power.execute_w_for(model_.step(k).op));
      st->execute_w += w;
    }
    for (hw::Device* d : st->spec.remote ? std::vector<hw::Device*>{} : st->spec.devices) {
      DeviceState ds;
      ds.dev = d;
      auto& slot = slots[d];
      if (!slot) slot = std::make_shared<GraphSlot>();
      ds.slot = slot;
      std::vector<hw::Event> after;
      if (d->info().time_source == hw::TimeSource::modelled)
        after.push_back({options_.preload_not_before_s, options_.preload_not_before_s, hw::TimeSource::modelled, 0});
      for (int k = st->spec.first; k <= st->spec.last; ++k) {
        std::vector<hw::BufferPtr> bufs;
        for (int wi : model_.step(k).weights) {
          const HostTensor& w = model_.weight(wi);
          if (w.size_only && !timing_only(*d))
            throw InputError(d->name(), "model weights are shape-only; the device is not timing-only");
          hw::BufferPtr b = d->allocate(w.bytes());
          hw::Event e = d->copy_from_host(*b, bytes_or_size(w.data.data(), w.bytes(), w.size_only), 0, after);
          if (e.source == hw::TimeSource::modelled) raise_preload_end(e.end_s);
          bufs.push_back(std::move(b));
        }
        ds.weights.push_back(std::move(bufs));
      }
      st->devs.push_back(std::move(ds));
    }
    if (st->has_spmm && options_.preload_graph && !st->spec.remote) {
      Request probe = Request::gnn(options_.preload_graph, HostTensor::shape_only(options_.preload_graph->nodes, 1));
      auto part = partition(*st, probe);
      for (std::size_t j = 0; j + 1 < part.size(); ++j) place_rows(st->devs[j], *options_.preload_graph, part[j], part[j + 1]);
    }
    stages_.push_back(std::move(st));
    auto q = std::make_unique<tbb::concurrent_bounded_queue<Work*>>();
    q->set_capacity(static_cast<std::ptrdiff_t>(std::max<std::size_t>(1, options_.queue_capacity)));
    queues_.push_back(std::move(q));
  }
  build_s_ = wall_now_s() - t0;
  for (std::size_t s = 0; s < stages_.size(); ++s) threads_.emplace_back([this, s] { worker(static_cast<int>(s)); });
}

Pipeline::~Pipeline() {
  close();
  join();
}

void Pipeline::submit(Job job) {
  if (closed_.load()) throw Error("pipeline epoch " + std::to_string(options_.epoch) + ": submit after close");
  if (spec_.first_kernel > 0 &&
      job.inputs.size() != static_cast<std::size_t>(model_.step(spec_.first_kernel).inputs()))
    throw InputError("job.inputs", "kernel " + model_.step(spec_.first_kernel).name + " reads " +
                                       std::to_string(model_.step(spec_.first_kernel).inputs()) + " tensors, the job has " +
                                       std::to_string(job.inputs.size()));
  auto w = std::make_unique<Work>();
  w->job = std::move(job);
  w->c.seq = w->job.seq;
  w->c.epoch = options_.epoch;
  if (max_in_flight_ > 0) {
    std::unique_lock lock(flight_mu_);
    flight_cv_.wait(lock, [&] { return in_flight_ < max_in_flight_; });
    ++in_flight_;
  }
  queues_[0]->push(w.release());
}

bool Pipeline::has_room() {
  if (closed_.load()) return false;
  if (max_in_flight_ > 0) {
    std::lock_guard lock(flight_mu_);
    if (in_flight_ >= max_in_flight_) return false;
  }
  return queues_[0]->size() < queues_[0]->capacity();
}

void Pipeline::close() {
  if (closed_.exchange(true)) return;
  queues_[0]->push(nullptr);
}

void Pipeline::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

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
    // kernels/graph/partition.h: whole rows, balanced by nnz (+1 per row so empty runs spread).
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

void Pipeline::worker(int s) {
  StageState& st = *stages_[s];
  {
    std::lock_guard lock(st.mu);
    st.start_wall_s = wall_now_s();
  }
  const bool last = s + 1 == static_cast<int>(stages_.size());
  for (;;) {
    Work* raw = nullptr;
    queues_[s]->pop(raw);
    if (!raw) {
      if (!last) queues_[s + 1]->push(nullptr);
      {
        std::lock_guard lock(st.mu);
        st.end_wall_s = wall_now_s();
      }
      finished_stages_++;
      return;
    }
    std::unique_ptr<Work> w(raw);
    st.taken++;
    w->timings.clear();
    const auto depth = std::max<std::ptrdiff_t>(0, queues_[s]->size());
    const double t0 = wall_now_s();
    double m0 = -1, m1 = -1;
    TransferCounters tc;
    if (!w->failed && w->job.request->cancel() && w->job.request->cancel()->expired()) {
      w->failed = true;  // the client stopped waiting: the stages left are not run
      w->c.error = std::make_exception_ptr(RequestCancelled(
          "request " + std::to_string(w->job.seq) + " cancelled before stage " + std::to_string(s) +
          " (its deadline passed or its client went away)"));
      w->act = Activation{};
      w->host.clear();
    }
    if (!w->failed) {
      std::string dead;
      {
        std::lock_guard lock(st.mu);
        if (!st.dead_device.empty()) dead = st.dead_device;
      }
      if (!dead.empty()) {
        w->failed = true;
        w->c.failed_device = dead;
        w->c.error = std::make_exception_ptr(hw::DeviceError(dead, "failed earlier in pipeline epoch " +
                                                                       std::to_string(options_.epoch)));
      } else {
        try {
          process(st, *w, tc);
          if (!w->c.stage_modelled_s.empty() && w->c.stage_modelled_s.back() >= 0) {
            m1 = w->c.modelled_end_s;
            m0 = m1 - w->c.stage_modelled_s.back();
          }
        } catch (const hw::DeviceError& e) {
          w->failed = true;
          w->c.failed_device = e.device();
          w->c.error = std::current_exception();
          std::lock_guard lock(st.mu);
          st.dead_device = e.device();
          st.dead_reason = e.what();
        } catch (...) {
          w->failed = true;
          w->c.error = std::current_exception();
        }
      }
      if (w->failed) {  // release device buffers now
        w->act = Activation{};
        w->host.clear();
      }
    }
    const double t1 = wall_now_s();
    w->c.stage_wall_s.push_back(t1 - t0);
    if (w->c.stage_modelled_s.size() < w->c.stage_wall_s.size()) w->c.stage_modelled_s.push_back(-1);
    {
      std::lock_guard lock(st.mu);
      st.stats.requests++;
      st.stats.transfers.p2p_copies += tc.p2p_copies;
      st.stats.transfers.staged_copies += tc.staged_copies;
      st.stats.transfers.moves += tc.moves;
      st.stats.transfers.bytes += tc.bytes;
      if (w->failed) st.stats.failed++;
      st.stats.busy_s += t1 - t0;
      if (w->c.stage_modelled_s.back() > 0) st.stats.modelled_busy_s += w->c.stage_modelled_s.back();
      st.stats.max_queue_depth = std::max<std::int64_t>(st.stats.max_queue_depth, depth);
      st.depth_sum += static_cast<double>(depth);
    }
    if (!options_.observers.empty()) {
      StageEvent ev;
      ev.epoch = options_.epoch;
      ev.stage = s;
      ev.seq = w->job.seq;
      ev.devices = st.names;
      ev.wall_start_s = t0;
      ev.wall_end_s = t1;
      ev.modelled_start_s = m0;
      ev.modelled_end_s = m1;
      ev.predicted_s = st.spec.predicted_s;
      ev.failed = w->failed;
      ev.kernels = std::move(w->timings);
      for (Observer* o : options_.observers) o->on_stage(ev);
    }
    {
      std::lock_guard lock(st.issue_mu);
      st.issued++;
    }
    st.issue_cv.notify_all();
    if (!last) {
      queues_[s + 1]->push(w.release());
    } else {
      if (!options_.observers.empty()) {
        const RequestEvent re = request_event(*w);
        for (Observer* o : options_.observers) o->on_request(re);
      }
      auto done = std::move(w->job.done);
      Completion c = std::move(w->c);
      w.reset();
      if (max_in_flight_ > 0) {
        {
          std::lock_guard lock(flight_mu_);
          --in_flight_;
        }
        flight_cv_.notify_one();
      }
      if (done) done(std::move(c));
    }
  }
}

RequestEvent Pipeline::request_event(const Work& w) const {
  RequestEvent e;
  e.epoch = options_.epoch;
  e.seq = w.job.seq;
  e.failed = w.failed;
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    StageTime t;
    t.predicted_s = stages_[s]->spec.predicted_s;
    t.modelled_s = s < w.c.stage_modelled_s.size() ? w.c.stage_modelled_s[s] : -1.0;
    t.wall_s = s < w.c.stage_wall_s.size() ? w.c.stage_wall_s[s] : 0.0;
    t.execute_w = stages_[s]->execute_w;
    e.stages.push_back(t);
  }
  return e;
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
      w.act = w.job.inputs.empty() ? xfer_.upload(req.input(), needs, w.job.not_before_s, tc)
                                   : xfer_.upload(std::span<const HostTensor>(w.job.inputs), needs, w.job.not_before_s, tc);
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
    const bool timed = timed_;
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
      w.c.output = xfer_.download(w.act, tc, end);
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

std::vector<StageStats> Pipeline::stats() const {
  std::vector<StageStats> out;
  const double now = wall_now_s();
  for (const auto& st : stages_) {
    std::lock_guard lock(st->mu);
    StageStats s = st->stats;
    s.lifetime_s = (st->end_wall_s >= 0 ? st->end_wall_s : now) - st->start_wall_s;
    s.mean_queue_depth = s.requests ? st->depth_sum / static_cast<double>(s.requests) : 0.0;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> Pipeline::dead_devices() const {
  std::vector<std::string> out;
  for (const auto& st : stages_) {
    std::lock_guard lock(st->mu);
    if (!st->dead_device.empty()) out.push_back(st->dead_reason);
  }
  return out;
}

}  // namespace dype::rt
