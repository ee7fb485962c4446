#include "runtime/observer.h"

#include <cstdio>
#include <fstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace dype::rt {

void ChromeTraceObserver::on_stage(const StageEvent& e) {
  nlohmann::json m;
  m["name"] = "req " + std::to_string(e.seq);
  m["cat"] = e.failed ? "failed" : "stage";
  m["ph"] = "X";
  m["pid"] = 1;  // measured
  m["tid"] = static_cast<std::int64_t>(e.epoch * 100 + static_cast<std::uint64_t>(e.stage));
  m["ts"] = e.wall_start_s * 1e6;
  m["dur"] = (e.wall_end_s - e.wall_start_s) * 1e6;
  m["args"] = {{"devices", e.devices}, {"epoch", e.epoch}, {"stage", e.stage},
               {"predicted_us (modelled)", e.predicted_s * 1e6}};
  std::vector<std::string> add{m.dump()};
  if (e.modelled_start_s >= 0.0) {
    nlohmann::json v = m;
    v["pid"] = 2;  // modelled device time
    v["ts"] = e.modelled_start_s * 1e6;
    v["dur"] = (e.modelled_end_s - e.modelled_start_s) * 1e6;
    add.push_back(v.dump());
  }
  std::lock_guard lock(mutex_);
  for (auto& s : add) push_locked(std::move(s));
}

void ChromeTraceObserver::push_locked(std::string event) {
  events_.push_back(std::move(event));
  while (events_.size() > max_events_) {
    events_.pop_front();
    ++dropped_;
  }
}

void ChromeTraceObserver::on_replan(const ReplanRecord& r) {
  nlohmann::json m;
  m["name"] = "replan: " + r.cause;
  m["ph"] = "i";
  m["s"] = "g";
  m["pid"] = 1;
  m["tid"] = 0;
  m["ts"] = 0;
  m["args"] = {{"detail", r.detail}, {"old", r.old_plan}, {"new", r.new_plan},
               {"predicted_gain (modelled)", r.predicted_gain}, {"swapped", r.swapped},
               {"pause_us (measured)", r.pause_s * 1e6}, {"at_request", r.at_request}};
  std::lock_guard lock(mutex_);
  push_locked(m.dump());
}

std::string ChromeTraceObserver::json() const {
  std::lock_guard lock(mutex_);
  std::string out = "{\"traceEvents\":[\n";
  out += R"J({"name":"process_name","ph":"M","pid":1,"args":{"name":"measured (wall clock)"}},)J";
  out += "\n";
  out += R"J({"name":"process_name","ph":"M","pid":2,"args":{"name":"modelled (emulated device clocks)"}})J";
  if (dropped_ > 0) {
    out += ",\n";
    out += nlohmann::json{{"name", "trace_dropped"}, {"ph", "M"}, {"pid", 1},
                          {"args", {{"dropped_events", dropped_}, {"kept_events", events_.size()},
                                    {"note", "the oldest events were dropped (--trace-max-events)"}}}}
               .dump();
  }
  for (const auto& e : events_) {
    out += ",\n";
    out += e;
  }
  out += "\n]}\n";
  return out;
}

void ChromeTraceObserver::write(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw InputError(path, "cannot open for writing");
  f << json();
  if (!f) throw InputError(path, "write failed");
}

void RequestEventQueue::on_request(const RequestEvent& e) {
  std::lock_guard lock(mutex_);
  events_.push_back(e);
}

std::vector<RequestEvent> RequestEventQueue::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(events_, {});
}

std::size_t ChromeTraceObserver::events() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

std::uint64_t ChromeTraceObserver::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void ObserverSet::add(std::shared_ptr<Observer> observer) {
  std::lock_guard lock(mu_);
  auto next = std::make_shared<std::vector<Observer*>>(*current_);
  next->push_back(observer.get());
  owned_.push_back(std::move(observer));
  current_ = std::move(next);
}

std::shared_ptr<const std::vector<Observer*>> ObserverSet::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

}  // namespace dype::rt
