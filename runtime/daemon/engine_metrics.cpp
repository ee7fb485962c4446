#include "runtime/daemon/engine_metrics.h"

#include <sstream>
#include <vector>

namespace dype::rt::daemon {
namespace {

// A label value as the text format needs it: quote, backslash and newline escaped.
std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}

// A metric family's "# HELP" and "# TYPE" lines.
void family_header(std::ostream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

std::string render_engine_metrics(std::span<const ServedEngine> engines, const std::string& mode,
                                  const hw::System& system, const UtilisationObserver* utilisation) {
  std::ostringstream o;
  family_header(o, "dype_plan_epoch", "gauge", "Current plan epoch per model.");
  for (const ServedEngine& s : engines) o << "dype_plan_epoch{model=\"" << s.name << "\"} " << s.engine->epoch() << "\n";
  family_header(o, "dype_plan_info", "gauge", "Current plan (label) and objective per model.");
  for (const ServedEngine& s : engines)
    o << "dype_plan_info{model=\"" << s.name << "\",plan=\"" << esc(s.engine->current_label()) << "\",mode=\""
      << mode << "\",pipeline=\"" << esc(describe(s.engine->current_spec())) << "\"} 1\n";
  family_header(o, "dype_replans_total", "counter", "Re-plans per model, cause and whether the pipeline was swapped.");
  for (const ServedEngine& s : engines) {
    for (const auto& [k, n] : s.engine->replan_counts())
      o << "dype_replans_total{model=\"" << s.name << "\",cause=\"" << k.first << "\",swapped=\""
        << (k.second ? "true" : "false") << "\"} " << n << "\n";
  }
  // Each family's lines together under its HELP and TYPE, as the text format requires.
  std::vector<EngineStats> stats;
  for (const ServedEngine& s : engines) stats.push_back(s.engine->stats());
  family_header(o, "dype_engine_requests_total", "counter", "Requests the engine answered, by result.");
  for (std::size_t i = 0; i < engines.size(); ++i) {
    const std::string& m = engines[i].name;
    o << "dype_engine_requests_total{model=\"" << m << "\",result=\"completed\"} "
      << stats[i].completed << "\n";
    o << "dype_engine_requests_total{model=\"" << m << "\",result=\"failed\"} " << stats[i].failed
      << "\n";
    o << "dype_engine_requests_total{model=\"" << m << "\",result=\"cancelled\"} "
      << stats[i].cancelled << "\n";
  }
  family_header(
      o, "dype_engine_reruns_total", "counter",
      "Requests run again on a new plan after a device failed under them (fault recovery).");
  for (std::size_t i = 0; i < engines.size(); ++i)
    o << "dype_engine_reruns_total{model=\"" << engines[i].name << "\"} " << stats[i].reruns
      << "\n";
  family_header(o, "dype_swap_pause_seconds_max", "gauge", "Longest client pause during a plan swap (measured).");
  for (std::size_t i = 0; i < engines.size(); ++i)
    o << "dype_swap_pause_seconds_max{model=\"" << engines[i].name << "\",source=\"measured\"} "
      << stats[i].max_pause_s << "\n";
  family_header(o, "dype_modelled_makespan_seconds", "gauge", "Latest modelled completion on emulated devices (modelled).");
  for (std::size_t i = 0; i < engines.size(); ++i)
    o << "dype_modelled_makespan_seconds{model=\"" << engines[i].name << "\",source=\"modelled\"} "
      << stats[i].modelled_makespan_s << "\n";
  family_header(o, "dype_inference_energy_joules_total", "counter",
                "Energy of the answered inferences: per stage, modelled busy time x\n"
                "# execute power of its devices (emulated device models).");
  for (std::size_t i = 0; i < engines.size(); ++i)
    o << "dype_inference_energy_joules_total{model=\"" << engines[i].name
      << "\",source=\"modelled\"} " << stats[i].modelled_energy_j << "\n";
  family_header(o, "dype_inference_energy_joules", "gauge", "Mean energy per answered inference (modelled).");
  for (std::size_t i = 0; i < engines.size(); ++i) {
    const EngineStats& st = stats[i];
    o << "dype_inference_energy_joules{model=\"" << engines[i].name << "\",source=\"modelled\"} "
      << (st.completed ? st.modelled_energy_j / static_cast<double>(st.completed) : 0.0) << "\n";
  }
  family_header(o, "dype_device_energy_joules_total", "counter",
                "Energy per device since start (modelled on emulated devices,\n"
                "# measured where the backend reads a power meter).");
  for (const hw::Device* d : system.devices()) {
    const auto e = d->energy();
    if (!e) continue;
    const char* src = d->info().time_source == hw::TimeSource::modelled ? "modelled" : "measured";
    o << "dype_device_energy_joules_total{device=\"" << d->name() << "\",state=\"execute\",source=\"" << src << "\"} " << e->execute_j << "\n";
    o << "dype_device_energy_joules_total{device=\"" << d->name() << "\",state=\"transfer\",source=\"" << src << "\"} " << e->transfer_j << "\n";
    o << "dype_device_energy_joules_total{device=\"" << d->name() << "\",state=\"idle\",source=\"" << src << "\"} " << e->idle_j << "\n";
  }
  if (utilisation) {
    const auto busy = utilisation->busy();
    const double up = utilisation->uptime_s(), span = utilisation->modelled_span_s();
    family_header(o, "dype_device_busy_seconds_total", "counter",
                  "Time each device spent in pipeline stages since start: the stages' host wall time\n"
                  "# (measured) and the emulated devices' virtual-clock time (modelled).");
    for (const hw::Device* d : system.devices()) {
      const auto it = busy.find(d->name());
      const DeviceBusy b = it != busy.end() ? it->second : DeviceBusy{};
      o << "dype_device_busy_seconds_total{device=\"" << d->name() << "\",source=\"measured\"} " << b.measured_s << "\n";
      if (d->info().time_source == hw::TimeSource::modelled)
        o << "dype_device_busy_seconds_total{device=\"" << d->name() << "\",source=\"modelled\"} " << b.modelled_s << "\n";
    }
    family_header(o, "dype_device_utilization", "gauge",
                  "Busy time per device over the time on the same clock: measured over the wall time since\n"
                  "# start, modelled over the span of the emulated clocks (rate() of the busy counter gives a window).");
    for (const hw::Device* d : system.devices()) {
      const auto it = busy.find(d->name());
      const DeviceBusy b = it != busy.end() ? it->second : DeviceBusy{};
      o << "dype_device_utilization{device=\"" << d->name() << "\",source=\"measured\"} " << (up > 0 ? b.measured_s / up : 0.0) << "\n";
      if (d->info().time_source == hw::TimeSource::modelled)
        o << "dype_device_utilization{device=\"" << d->name() << "\",source=\"modelled\"} " << (span > 0 ? b.modelled_s / span : 0.0) << "\n";
    }
  }
  // Per stage of each current pipeline: each stage's labels and figures, then a family at a time.
  struct Stage {
    std::string labels;
    StageStats stats;
  };
  std::vector<Stage> stages;
  for (const ServedEngine& s : engines) {
    const auto st = s.engine->stage_stats();
    for (std::size_t i = 0; i < st.size(); ++i)
      stages.push_back({"model=\"" + s.name + "\",stage=\"" + std::to_string(i) + "\",devices=\"" +
                            esc(st[i].devices) + "\"",
                        st[i]});
  }
  const auto stage_family = [&](const char* name, const char* type, const char* help,
                                const char* source, const auto& value) {
    family_header(o, name, type, help);
    for (const Stage& st : stages)
      o << name << '{' << st.labels << (source ? std::string(",source=\"") + source + '"' : "")
        << "} " << value(st.stats) << "\n";
  };
  stage_family(
      "dype_stage_busy_ratio", "gauge",
      "Busy time / lifetime of each stage of the current pipeline (measured).", "measured",
      [](const StageStats& st) { return st.lifetime_s > 0 ? st.busy_s / st.lifetime_s : 0.0; });
  stage_family("dype_stage_modelled_busy_seconds", "gauge",
               "Modelled device time each stage of the current pipeline has spent on its requests "
               "(modelled).",
               "modelled", [](const StageStats& st) { return st.modelled_busy_s; });
  stage_family("dype_stage_queue_depth_max", "gauge",
               "Deepest queue in front of each stage of the current pipeline.", nullptr,
               [](const StageStats& st) { return st.max_queue_depth; });
  stage_family("dype_stage_queue_depth_mean", "gauge",
               "Mean queue depth in front of each stage of the current pipeline, seen as it takes "
               "a request.",
               nullptr, [](const StageStats& st) { return st.mean_queue_depth; });
  stage_family("dype_stage_requests_total", "counter",
               "Requests each stage of the current pipeline has processed.", nullptr,
               [](const StageStats& st) { return st.requests; });
  return o.str();
}

}  // namespace dype::rt::daemon
