#include "runtime/daemon/metrics.h"

#include <algorithm>
#include <sstream>

#include "runtime/host_buffer_pool.h"

namespace dype::rt::daemon {

std::string prometheus_label(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {
std::string escaped(const std::string& v) { return prometheus_label(v); }
}  // namespace

void Metrics::set_served(const std::set<std::string>& names) {
  std::lock_guard lock(mu_);
  served_ = names;
}

void Metrics::record(const std::string& name, const std::string& reason, double seconds) {
  std::lock_guard lock(mu_);
  const std::string& model = served_.empty() || name.empty() || served_.count(name) ? name : kUnknown;
  ++requests_[{model, reason}];
  if (reason != "ok") return;
  Histogram& h = durations_[model];
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++h.le[i];
  ++h.count;
  h.sum += seconds;
}

void Metrics::record_split(const std::string& name, double queue_s, double compute_s) {
  std::lock_guard lock(mu_);
  const std::string& model = served_.empty() || name.empty() || served_.count(name) ? name : kUnknown;
  Split& s = splits_[model];
  s.queue_us += std::max(0.0, queue_s) * 1e6;
  s.compute_us += std::max(0.0, compute_s) * 1e6;
  ++s.count;
}

std::uint64_t Metrics::count(const std::string& model, const std::string& reason) const {
  std::lock_guard lock(mu_);
  auto it = requests_.find({model, reason});
  return it == requests_.end() ? 0 : it->second;
}

std::string Metrics::render(const std::string& extra) const {
  std::ostringstream o;
  std::lock_guard lock(mu_);
  o << "# HELP dype_requests_total Inference requests by model and result (ok or the failure reason).\n"
       "# TYPE dype_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    o << "dype_requests_total{model=\"" << escaped(k.first) << "\",result=\"" << escaped(k.second) << "\"} " << n << "\n";
  o << "# HELP dype_request_duration_seconds Time from request received to response ready (measured).\n"
       "# TYPE dype_request_duration_seconds histogram\n";
  for (const auto& [model, h] : durations_) {
    for (std::size_t i = 0; i < kBuckets.size(); ++i)
      o << "dype_request_duration_seconds_bucket{model=\"" << escaped(model) << "\",le=\"" << kBuckets[i] << "\"} " << h.le[i] << "\n";
    o << "dype_request_duration_seconds_bucket{model=\"" << escaped(model) << "\",le=\"+Inf\"} " << h.count << "\n";
    o << "dype_request_duration_seconds_sum{model=\"" << escaped(model) << "\"} " << h.sum << "\n";
    o << "dype_request_duration_seconds_count{model=\"" << escaped(model) << "\"} " << h.count << "\n";
  }
  if (!splits_.empty()) {
    o << "# HELP dype_request_queue_duration_us Cumulative microseconds successful requests spent from received "
         "in full until the engine took them (measured).\n# TYPE dype_request_queue_duration_us counter\n";
    for (const auto& [model, sp] : splits_)
      o << "dype_request_queue_duration_us{model=\"" << escaped(model) << "\"} " << static_cast<std::uint64_t>(sp.queue_us) << "\n";
    o << "# HELP dype_request_compute_duration_us Cumulative microseconds successful requests spent in the engine, "
         "submit to answer (measured).\n# TYPE dype_request_compute_duration_us counter\n";
    for (const auto& [model, sp] : splits_)
      o << "dype_request_compute_duration_us{model=\"" << escaped(model) << "\"} " << static_cast<std::uint64_t>(sp.compute_us) << "\n";
    o << "# HELP dype_request_split_count Successful requests counted in the queue and compute durations.\n"
         "# TYPE dype_request_split_count counter\n";
    for (const auto& [model, sp] : splits_)
      o << "dype_request_split_count{model=\"" << escaped(model) << "\"} " << sp.count << "\n";
  }
  o << "# HELP dype_requests_in_flight Admitted requests not yet answered.\n# TYPE dype_requests_in_flight gauge\n"
    << "dype_requests_in_flight " << in_flight_.load() << "\n";
  const HostBufferPoolStats rb = receive_buffers().stats();
  o << "# HELP dype_receive_buffer_bytes Host buffers large payloads (gRPC raw contents, HTTP bodies) are received "
       "into: free (kept for the next request) and pinned (page-locked for the GPUs' DMA, free or in use).\n"
       "# TYPE dype_receive_buffer_bytes gauge\n"
    << "dype_receive_buffer_bytes{state=\"free\"} " << rb.free_bytes << "\n"
    << "dype_receive_buffer_bytes{state=\"pinned\"} " << rb.pinned_bytes << "\n"
    << "# HELP dype_receive_buffers_total Large received payloads by where their buffer came from: allocated, or "
       "reused from an earlier request.\n# TYPE dype_receive_buffers_total counter\n"
    << "dype_receive_buffers_total{source=\"allocated\"} " << rb.allocated << "\n"
    << "dype_receive_buffers_total{source=\"reused\"} " << rb.reused << "\n"
    << "# HELP dype_receive_buffer_pin_failures_total Receive buffers a GPU backend could not pin (used unpinned: "
       "GPU uploads from them take the staging copy).\n# TYPE dype_receive_buffer_pin_failures_total counter\n"
    << "dype_receive_buffer_pin_failures_total " << rb.pin_failed << "\n";
  o << extra;
  return o.str();
}

}  // namespace dype::rt::daemon
