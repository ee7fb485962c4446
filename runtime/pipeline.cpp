#include "runtime/pipeline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <set>

#include <tbb/parallel_for.h>

#include "hw/kernel_launch.h"
#include "common/error.h"
#include "graph/partition.h"
#include "runtime/pipeline_state.h"
#include "runtime/rows_needed.h"

namespace dype::rt {

using kernels::OpKind;

namespace {

double wall_now_s() { return hw::now_s(); }

}  // namespace

Pipeline::Pipeline(const Model& model, PipelineSpec spec, PipelineOptions options)
    : model_(model), spec_(std::move(spec)), options_(std::move(options)) {
  const double t0 = wall_now_s();
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
    st->names = device_names(st->spec);
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
          // Mapped x that kernels read in place (TransferEngine::upload_input) has been read by
          // the last stage: an answer computed from memory that shrank meanwhile is refused.
          if (last && w->job.request->mapped_input())
            check_mapped_intact(*w->job.request->mapped_input());
          if (const AnswerMemory* a = last ? w->job.request->answer_memory() : nullptr;
              a && a->written->load() && a->intact && !a->intact())
            throw InputError("outputs",
                             "the answer's shared-memory region shrank while it was written (the "
                             "object behind it was truncated): register the region again");
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
      if (w->failed) {  // release device buffers now; a failed request carries no answer
        w->act = Activation{};
        w->host.clear();
        w->c.output = HostTensor{};
        w->c.tensors.clear();
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
    if (const std::vector<Observer*> observers = observers_now(); !observers.empty()) {
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
      for (Observer* o : observers) o->on_stage(ev);
    }
    {
      std::lock_guard lock(st.issue_mu);
      st.issued++;
    }
    st.issue_cv.notify_all();
    if (!last) {
      queues_[s + 1]->push(w.release());
    } else {
      if (const std::vector<Observer*> observers = observers_now(); !observers.empty()) {
        const RequestEvent re = request_event(*w);
        for (Observer* o : observers) o->on_request(re);
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


std::vector<Observer*> Pipeline::observers_now() const {
  std::vector<Observer*> out = options_.observers;
  if (options_.more_observers) {
    const auto more = options_.more_observers->current();
    out.insert(out.end(), more->begin(), more->end());
  }
  return out;
}

bool Pipeline::timed_now() const {
  for (const Observer* o : observers_now())
    if (o->wants_kernel_timings()) return true;
  return false;
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
