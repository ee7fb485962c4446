#pragma once
// Daemon-side Prometheus metrics: request outcomes by reason, request durations (histogram, measured),
// admission queue depth. The runtime's own figures (plans, re-plans, stages) come from
// InferenceService::metrics_text() and are appended when rendering.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace dype::rt::daemon {

// A label value per the Prometheus text format: backslash, double quote and newline escaped, so a
// model name from a URL cannot close the label and inject a metric line.
std::string prometheus_label(const std::string& v);

class Metrics {
 public:
  // reason: "ok", "bad_input", "not_found", "too_large", "overloaded", "unavailable", "internal", ...
  void record(const std::string& model, const std::string& reason, double seconds);
  // A successful request's split (measured, Triton's nv_inference_queue/compute_duration_us):
  // queue = from the request received in full until the engine took it (waiting for a worker or
  // room, admission, parsing, building the engine request); compute = the engine's submit to
  // answer (its pipeline, stage queues included). Summed per model in microseconds.
  void record_split(const std::string& model, double queue_s, double compute_s);
  void set_in_flight(std::int64_t n) { in_flight_.store(n); }
  // The served model names; once set, requests naming any other model are counted under
  // model="unknown", so a client cannot add series without bound.
  void set_served(const std::set<std::string>& names);
  // Text exposition format 0.0.4, followed by `extra` (the service's lines).
  std::string render(const std::string& extra) const;
  std::uint64_t count(const std::string& model, const std::string& reason) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> le{};
    std::uint64_t count = 0;
    double sum = 0.0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_;
  std::map<std::string, Histogram> durations_;  // successful requests per model
  struct Split {
    double queue_us = 0.0, compute_us = 0.0;
    std::uint64_t count = 0;
  };
  std::map<std::string, Split> splits_;
  inline static const std::string kUnknown = "unknown";
  std::set<std::string> served_;  // empty: every name is its own label (unit tests)
  std::atomic<std::int64_t> in_flight_{0};
};

}  // namespace dype::rt::daemon
