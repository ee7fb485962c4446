// EngineService's figures for the status page (GET /v2/dype/status, runtime/daemon/status/): what
// an operator looks at, gathered from the engines' own accounts. Every figure says whether it was
// measured or modelled, as the admin API's answers do.
#include <cmath>

#include "runtime/daemon/engine_service.h"
#include "scheduler/plan.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"
#include "runtime/planning/perf_planner.h"

namespace dype::rt::daemon {
namespace {

using json = nlohmann::json;

json characteristics_json(const Characteristics& c) {
  return {{"nodes", c.nodes}, {"nnz", c.nnz}, {"feature_len", c.feature_len}, {"seq_len", c.seq_len},
          {"window", c.window}};
}

json drift_json(const DriftWatch& w) {
  json fields = json::array();
  for (const DriftWatch::Field& f : w.fields)
    fields.push_back({{"name", f.name}, {"baseline", f.baseline}, {"recent", f.recent}, {"change", f.change}});
  json stages = json::array();
  for (const DriftWatch::Stage& s : w.stages)
    stages.push_back({{"stage", s.stage}, {"planned_ratio", s.planned_ratio}, {"recent_ratio", s.recent_ratio},
                      {"change", s.change}});
  const DriftOptions& o = w.options;
  return {{"enabled", o.enabled},
          {"threshold", o.threshold},
          {"stage_time_threshold", o.stage_time_threshold},
          {"sustain", o.sustain},
          {"window", o.window},
          {"min_requests_between", o.min_requests_between},
          {"min_gain", o.min_gain},
          {"streak", w.streak},
          {"streak_field", w.streak_field},
          {"window_requests", w.window_requests},
          {"characteristics", fields},
          {"stage_times", stages}};
}

// A JSON number, or null for what is not one (a gain against a plan that breaks the constraint).
json finite(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

json EngineService::status() const {
  std::vector<std::shared_ptr<Served>> served;
  {
    std::shared_lock lock(served_mu_);
    served = served_;
  }
  json models = json::array();
  for (const auto& s : served) {
    const Engine& e = *s->engine;
    const PipelineSpec spec = e.current_spec();
    const std::vector<StageStats> stats = e.stage_stats();
    json stages = json::array();
    for (std::size_t i = 0; i < spec.stages.size(); ++i) {
      const PipelineStage& st = spec.stages[i];
      json devs = json::array();
      for (const hw::Device* d : st.devices) devs.push_back(d->name());
      json j = {{"kernels", {s->model->step(st.first).name, s->model->step(st.last).name}},
                {"first", st.first},
                {"last", st.last},
                {"devices", devs},
                {"predicted_s", st.predicted_s}};
      // Per request on the running pipeline: wall time (measured) and the emulated devices' time.
      if (i < stats.size() && stats[i].requests > 0) {
        const double n = static_cast<double>(stats[i].requests);
        j["requests"] = stats[i].requests;
        j["measured_s"] = stats[i].busy_s / n;
        if (stats[i].modelled_busy_s > 0) j["modelled_s"] = stats[i].modelled_busy_s / n;
        j["mean_queue_depth"] = stats[i].mean_queue_depth;
      }
      stages.push_back(std::move(j));
    }
    const std::vector<ReplanRecord> all = e.replans();
    json replans = json::array();
    for (std::size_t i = all.size() > kStatusReplans ? all.size() - kStatusReplans : 0; i < all.size(); ++i) {
      const ReplanRecord& r = all[i];
      replans.push_back({{"old_epoch", r.old_epoch}, {"new_epoch", r.new_epoch}, {"cause", r.cause},
                         {"detail", r.detail}, {"old_plan", r.old_plan}, {"new_plan", r.new_plan},
                         {"predicted_gain", finite(r.predicted_gain)}, {"swapped", r.swapped},
                         {"pause_s", r.pause_s}, {"at_request", r.at_request}});
    }
    json epochs = json::array();
    for (const EpochThroughput& x : s->epochs->epochs())
      epochs.push_back({{"epoch", x.epoch}, {"requests", x.requests}, {"first_s", x.first_s}, {"last_s", x.last_s},
                        {"throughput_per_s", x.throughput_per_s()},
                        {"modelled_energy_j_per_inference",
                         x.requests ? x.modelled_energy_j / static_cast<double>(x.requests) : 0.0}});
    const EngineStats st = e.stats();
    const Engine::PlanningState ps = e.planning_state();
    const auto* fitted = dynamic_cast<const PerfModelPlanner*>(s->planner.get());
    models.push_back({{"model", s->name},
                      {"version", s->version},
                      {"mode", ps.mode},
                      {"epoch", e.epoch()},
                      {"label", e.current_label()},
                      {"pipeline", describe(spec)},
                      {"stages", stages},
                      {"kernels", s->model->steps().size()},
                      {"replans", replans},
                      {"replans_total", st.swaps},
                      {"epochs", epochs},
                      {"epoch_clock_s", s->epochs->uptime_s()},
                      {"planned_for", characteristics_json(ps.characteristics)},
                      {"drift", drift_json(e.drift_watch())},
                      {"requests", {{"submitted", st.submitted}, {"completed", st.completed}, {"failed", st.failed}}},
                      {"modelled_energy_j", st.modelled_energy_j},
                      {"cost_source", fitted ? fitted->cost_source() : std::string("device models")}});
  }
  json busy = json::object();
  for (const auto& [device, b] : utilisation_->busy())
    busy[device] = {{"measured_s", b.measured_s}, {"modelled_s", b.modelled_s}, {"passes", b.passes}};
  return {{"mode", mode()},
          {"models", models},
          {"busy", {{"devices", busy},
                    {"uptime_s", utilisation_->uptime_s()},
                    {"modelled_span_s", utilisation_->modelled_span_s()}}}};
}

json EngineService::status_devices() const {
  std::vector<std::shared_ptr<Served>> served;
  {
    std::shared_lock lock(served_mu_);
    served = served_;
  }
  json pareto = json::object();
  for (const auto& s : served) {
    // The front for what the current plan was made for, without the devices it leaves out.
    const Engine::PlanningState ps = s->engine->planning_state();
    const sched::SystemSpec spec = s->planner->system_spec(ps.left_out);
    const auto cm = s->planner->cost_model(spec, ps.characteristics);
    const std::string current = s->engine->current_label();
    json plans = json::array();
    bool on_front = false;
    for (const sched::Plan& p : sched::pareto_front_shapes(spec, cm, recurrent_shapes(*s->model))) {
      const bool is_current = p.mnemonic == current;
      on_front = on_front || is_current;
      plans.push_back({{"mnemonic", p.mnemonic}, {"throughput_per_s", finite(p.throughput_per_s)},
                       {"energy_j_per_inference", finite(p.energy_j)}, {"latency_s", finite(p.latency_s)},
                       {"devices_used", p.devices_used}, {"current", is_current}});
    }
    pareto[s->name] = {{"source", "modelled"}, {"current", current}, {"current_on_front", on_front},
                       {"characteristics", characteristics_json(ps.characteristics)}, {"plans", plans}};
  }
  json out = devices();
  for (json& d : out["devices"])
    for (const hw::Device* dev : system_->devices())
      if (dev->name() == d.value("name", "")) d["product"] = dev->info().product;
  out["pareto"] = pareto;
  return out;
}

}  // namespace dype::rt::daemon
