#pragma once
// The pipeline executor: one worker thread per stage, stages joined by bounded oneTBB queues
// (tbb::concurrent_bounded_queue: a full queue blocks the producer, so memory stays bounded and
// back-pressure reaches the client). Requests run in submission order, several in flight (one per
// stage plus what the queues hold). Within a stage of c devices the rows are split (by nnz when
// the stage has an SpMM, evenly otherwise); static data (the graph rows each device owns, the
// weights of the stage's GEMMs) is preloaded when the pipeline is built; per-request activations
// move through the TransferEngine.
//
//   rt::PipelineSpec spec{{{.first = 0, .last = 1, .devices = {&gpu0, &gpu1}},
//                          {.first = 2, .last = 3, .devices = {&fpga0}}}};
//   rt::Pipeline p(model, spec, {.preload_graph = graph});
//   p.submit({.seq = 0, .request = req, .done = [](rt::Completion c) { ... }});
//   p.close(); p.join();
//
// A DeviceError during a stage marks the device dead: that request and every later one through
// the stage complete with an error naming the device (the engine re-plans and re-runs them).
// Observers (observer.h) hear of every stage pass (on_stage) and of every request leaving the last
// stage (on_request, before its `done`).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tbb/concurrent_queue.h>

#include "hw/device.h"
#include "runtime/model.h"
#include "runtime/observer.h"
#include "runtime/pipeline_spec.h"
#include "runtime/stage_link.h"
#include "runtime/transfer.h"

namespace dype::rt {

namespace pipeline_state {  // pipeline_state.h
struct Work;
struct GraphRows;
struct GraphSlot;
struct DeviceState;
struct StageState;
}  // namespace pipeline_state

struct PipelineOptions {
  std::size_t queue_capacity = 2;  // per inter-stage queue (and the input queue)
  std::shared_ptr<const Graph> preload_graph;  // graph rows to place on the devices at build
  double preload_not_before_s = 0.0;           // virtual time preloading may start
  std::uint64_t epoch = 0;
  std::vector<Observer*> observers;
  // More observers, read at each event: those added to the set while the pipeline runs hear it
  // from then on (an Engine's add_observer).
  std::shared_ptr<const ObserverSet> more_observers;
  // Requests admitted at once (submit blocks beyond): 0 = bounded by the queues alone, which for
  // a recurrent pipeline would be 2 x rounds x stages; it then defaults to 2 x stages per round + 2,
  // enough to keep every device busy.
  std::size_t max_in_flight = 0;
};

class Pipeline {
 public:
  // Validates the spec (contiguous stages covering the model, devices supporting every op of
  // their stage, no device in two stages; InputError otherwise), preloads static data, starts
  // the workers.
  Pipeline(const Model& model, PipelineSpec spec, PipelineOptions options = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Blocks while the input queue is full. Must not be called after close().
  void submit(Job job);
  // Whether submit() would take a job now without waiting (room under max_in_flight and in the
  // input queue). Exact only while the caller is the one thread that submits (the engine checks
  // and submits under its submission lock): the stages only make room.
  bool has_room();
  // No more submissions; workers exit once everything queued has completed.
  void close();
  void join();
  bool finished() const { return finished_stages_.load() == static_cast<int>(stages_.size()); }

  std::uint64_t epoch() const { return options_.epoch; }
  const PipelineSpec& spec() const { return spec_; }
  std::vector<StageStats> stats() const;
  // Devices that failed in this pipeline ("name: reason").
  std::vector<std::string> dead_devices() const;
  double build_s() const { return build_s_; }             // measured
  double preload_modelled_end_s() const { return preload_end_s_.load(std::memory_order_relaxed); }  // modelled

 private:
  using Work = pipeline_state::Work;
  using GraphRows = pipeline_state::GraphRows;
  using GraphSlot = pipeline_state::GraphSlot;
  using DeviceState = pipeline_state::DeviceState;
  using StageState = pipeline_state::StageState;
  void worker(int s);
  void process(StageState& st, Work& w, TransferCounters& tc);
  // A stage on another host (PipelineStage::remote): its input leaves, and its output arrives,
  // through host memory.
  void process_remote(StageState& st, Work& w, TransferCounters& tc);
  // What the stage after `st` needs of this request's activation, once its devices have been
  // given everything of the request before (the issue order below).
  std::vector<Need> next_stage_needs(StageState& st, const Request& req);
  // The graph rows [r0, r1) on ds's device, shared by the stages of every round on that device.
  void place_rows(DeviceState& ds, const Graph& g, std::int64_t r0, std::int64_t r1);
  std::shared_ptr<GraphRows> preload(hw::Device& d, const Graph& g, std::int64_t r0, std::int64_t r1);
  std::vector<std::int64_t> partition(StageState& st, const Request& r);
  // The observers' view of a request leaving the last stage.
  RequestEvent request_event(const Work& w) const;
  // What each device of `st` must hold before kernel k (held: the activation already on them).
  std::vector<Need> needs_for(const StageState& st, const std::vector<std::int64_t>& part, int k, const Request& req,
                              const Activation* held) const;

  const Model& model_;
  PipelineSpec spec_;
  PipelineOptions options_;
  TransferEngine xfer_;
  std::vector<std::unique_ptr<StageState>> stages_;
  std::vector<std::unique_ptr<tbb::concurrent_bounded_queue<Work*>>> queues_;  // queues_[s] feeds stage s
  std::vector<std::thread> threads_;
  std::atomic<int> finished_stages_{0};
  std::atomic<bool> closed_{false};
  std::size_t max_in_flight_ = 0;  // 0: unbounded (the queues bound it)
  std::mutex flight_mu_;
  std::condition_variable flight_cv_;
  std::size_t in_flight_ = 0;
  double build_s_ = 0.0;
  // The observers to tell now: options_.observers and more_observers as it stands.
  std::vector<Observer*> observers_now() const;
  // Whether an observer now reads the kernel launches' times.
  bool timed_now() const;
  // Latest modelled end of a preload: stage workers preloading a new graph raise it concurrently.
  std::atomic<double> preload_end_s_{0.0};
  void raise_preload_end(double t);
};

// Steady-state period of `spec` on emulated devices (modelled seconds): `warmup + n` copies of
// `request` enter at virtual time 0 (open loop, so the pipeline is never starved) and the period
// is the spacing of the last n completions. Advances the devices' virtual clocks; the figure does
// not depend on where they started. Throws when a request fails or a device is not modelled.
double modelled_period_s(const Model& model, const PipelineSpec& spec, const Request& request, int warmup = 8,
                         int n = 32);

}  // namespace dype::rt
