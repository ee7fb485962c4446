#pragma once
// Observers: what the runtime tells the outside while it runs (Taskflow's observer shape). The
// pipeline and the engine call them; they never change what runs. The engine keeps its energy
// account as one (energy_observer.h); tracing is another and is off unless attached:
//
//   auto trace = std::make_shared<rt::ChromeTraceObserver>();
//   engine.add_observer(trace);
//   ... serve ...
//   trace->write("trace.json");   // open in Perfetto / chrome://tracing
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/op.h"

namespace dype::rt {

// One kernel launch on one device of a stage: the shape it ran (the device's shard) and how long
// the device took (modelled on emulated devices, measured otherwise).
struct KernelTiming {
  int kernel = 0;            // index in the model's chain
  std::string device;        // "gpu0"
  kernels::OpShape shape;
  double seconds = 0.0;
  bool modelled = false;
};

// One request's pass through one stage. Wall times are measured (steady clock, seconds);
// modelled times come from emulated devices' virtual clocks (negative when none).
struct StageEvent {
  std::uint64_t epoch = 0;
  int stage = 0;
  std::uint64_t seq = 0;
  std::string devices;  // "gpu0+gpu1"
  double wall_start_s = 0.0;
  double wall_end_s = 0.0;
  double modelled_start_s = -1.0;
  double modelled_end_s = -1.0;
  double predicted_s = 0.0;  // the plan's stage time (modelled)
  bool failed = false;
  std::vector<KernelTiming> kernels;  // every launch of the stage (filled only for observers)
};

// One request's way through a whole pipeline, told once its last stage is done (before its answer
// is released): per stage, the plan's time, the modelled and measured times and the power of the
// stage's devices. Energy accounting and stage-time drift read it.
struct StageTime {
  double predicted_s = 0.0;  // the plan's stage time (modelled)
  double modelled_s = -1.0;  // emulated devices' busy time for this request (-1: none)
  double wall_s = 0.0;       // measured
  double execute_w = 0.0;    // execute power of the stage's devices for its kernels (device models)
};
struct RequestEvent {
  std::uint64_t epoch = 0;
  std::uint64_t seq = 0;
  bool failed = false;  // some stage failed: the request runs again or is answered with the error
  std::vector<StageTime> stages;
};

// Why and how a re-plan happened. Every swap has one.
struct ReplanRecord {
  std::uint64_t old_epoch = 0;
  std::uint64_t new_epoch = 0;
  std::string cause;           // "drift", "fault", "mode", "manual", "initial"
  std::string detail;          // "nnz 1.2e6 -> 4.1e6 (+240%) sustained 8 requests"
  std::string old_plan;        // mnemonic / label
  std::string new_plan;
  double predicted_gain = 0.0;  // old / new objective score - 1 under the new characteristics (modelled; perf: period, else energy)
  bool swapped = false;         // false: the new plan was not better by the hysteresis
  double build_s = 0.0;         // measured: building + preloading the new pipeline
  double pause_s = 0.0;         // measured: how long the submitting client was held
  std::uint64_t at_request = 0;
  std::string cost_source;      // where the planner's kernel times came from (fitted models / device models)
};

// Called from pipeline threads (on_stage, on_request: several at once) and under the engine's
// submission lock (on_replan); an observer guards its own state and must not block.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_stage(const StageEvent&) {}
  virtual void on_request(const RequestEvent&) {}
  virtual void on_replan(const ReplanRecord&) {}
  // Whether it reads StageEvent::kernels (collecting them costs a record per launch).
  virtual bool wants_kernel_timings() const { return true; }
};

// Observers that may be added while pipelines run: an Engine's own set, which every pipeline it
// builds reads at each event, so an observer added later hears the running pipeline too (as
// Taskflow's observers take effect at once). Observers are only added, and each lives as long as
// the set.
class ObserverSet {
 public:
  void add(std::shared_ptr<Observer> observer);
  // The observers as they stand: a snapshot, cheap to take and safe to read while others add.
  std::shared_ptr<const std::vector<Observer*>> current() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Observer>> owned_;
  std::shared_ptr<const std::vector<Observer*>> current_ = std::make_shared<const std::vector<Observer*>>();
};

// Keeps every finished request's event until take(): how pipeline threads hand stage times to a
// reader that runs elsewhere (the re-plan controller reads them at each submission).
class RequestEventQueue : public Observer {
 public:
  void on_request(const RequestEvent& e) override;
  bool wants_kernel_timings() const override { return false; }
  std::vector<RequestEvent> take();

 private:
  std::mutex mutex_;
  std::vector<RequestEvent> events_;
};

// Chrome trace-event JSON (the "X" complete events of the Trace Event Format): one track per
// epoch and stage, measured wall time; modelled device time goes in a second process track.
class ChromeTraceObserver : public Observer {
 public:
  // Keeps the most recent `max_events` events (a ring: a daemon traced for days holds a bounded
  // buffer); the older ones are dropped and counted, and the written trace says how many.
  explicit ChromeTraceObserver(std::size_t max_events = 200000) : max_events_(std::max<std::size_t>(1, max_events)) {}
  void on_stage(const StageEvent& e) override;
  void on_replan(const ReplanRecord& r) override;
  std::string json() const;
  void write(const std::string& path) const;  // throws InputError when the file cannot be written
  std::size_t events() const;
  std::uint64_t dropped() const;

 private:
  void push_locked(std::string event);

  mutable std::mutex mutex_;
  std::size_t max_events_;
  std::deque<std::string> events_;
  std::uint64_t dropped_ = 0;
};

}  // namespace dype::rt
