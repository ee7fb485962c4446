#include "runtime/daemon/engine_service.h"

#include <sstream>

#include "hw/system_config.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"
#include "scheduler/solver.h"
#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {
namespace {

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}

}  // namespace

std::vector<ServedModel> default_models() {
  ModelSpec gcn{.family = ModelFamily::gcn, .layers = 2, .in_features = 64, .hidden = 128};
  ModelSpec gin{.family = ModelFamily::gin, .layers = 2, .in_features = 64, .hidden = 128};
  ModelSpec tf{.family = ModelFamily::transformer, .layers = 2, .d_model = 256, .heads = 4, .ffn = 1024};
  Characteristics g{.nodes = 4096, .nnz = 40960, .feature_len = 64, .degree_skew = 1.0};
  Characteristics t{.feature_len = 256, .seq_len = 1024, .window = 64};
  return {{"gcn", gcn, g}, {"gin", gin, g}, {"swin-transformer", tf, t}};
}

EngineService::EngineService(EngineServiceOptions options) : options_(std::move(options)) {
  system_ = std::make_unique<hw::System>(options_.system_config.empty()
                                             ? hw::System::detect()
                                             : hw::System::from_config(hw::load_system_config(options_.system_config)));
  if (options_.models.empty()) options_.models = default_models();
  mode_ = options_.mode;
  EngineOptions eo = options_.engine;
  eo.mode = mode_;
  for (const ServedModel& m : options_.models) {
    auto s = std::make_unique<Served>();
    s->name = m.name;
    s->plan_for = m.plan_for;
    s->model = std::make_unique<Model>(Model::make(m.spec));
    s->planner = std::make_shared<SchedPlanner>(*s->model, *system_);
    s->engine = std::make_unique<Engine>(*s->model, s->planner, m.plan_for, eo);
    served_.push_back(std::move(s));
  }
}

EngineService::~EngineService() {
  // Engines drain in their destructors; they must go before the models and system they use.
  for (auto& s : served_) s->engine.reset();
}

EngineService::Served& EngineService::find(const std::string& name) const {
  for (const auto& s : served_)
    if (s->name == name) return *s;
  throw NotFound("unknown model '" + name + "'");
}

std::vector<ModelInfo> EngineService::models() const {
  std::vector<ModelInfo> out;
  for (const auto& s : served_) out.push_back(describe_model(s->name, *s->model));
  return out;
}

ModelInfo EngineService::model(const std::string& name) const {
  const Served& s = find(name);
  return describe_model(s.name, *s.model);
}

bool EngineService::model_ready(const std::string& name) const { return find(name).engine != nullptr; }

std::future<HostTensor> EngineService::infer(const std::string& model, Request request) {
  return find(model).engine->submit(std::move(request));
}

Engine& EngineService::engine(const std::string& model) { return *find(model).engine; }

nlohmann::json EngineService::plan(const std::string& model) const {
  const Served& s = find(model);
  const PipelineSpec spec = s.engine->current_spec();
  nlohmann::json stages = nlohmann::json::array();
  for (const PipelineStage& st : spec.stages) {
    nlohmann::json devs = nlohmann::json::array();
    for (const hw::Device* d : st.devices) devs.push_back(d->name());
    stages.push_back({{"kernels", {s.model->step(st.first).name, s.model->step(st.last).name}},
                      {"devices", devs},
                      {"predicted_s", st.predicted_s},
                      {"predicted_source", "modelled"}});
  }
  nlohmann::json replans = nlohmann::json::array();
  for (const ReplanRecord& r : s.engine->replans()) {
    replans.push_back({{"old_epoch", r.old_epoch}, {"new_epoch", r.new_epoch}, {"cause", r.cause},
                       {"detail", r.detail}, {"old_plan", r.old_plan}, {"new_plan", r.new_plan},
                       {"predicted_gain", r.predicted_gain}, {"swapped", r.swapped},
                       {"build_s", r.build_s}, {"pause_s", r.pause_s}, {"at_request", r.at_request}});
  }
  return {{"model", s.name}, {"mode", mode()}, {"epoch", s.engine->epoch()}, {"label", s.engine->current_label()},
          {"pipeline", describe(spec)}, {"stages", stages}, {"replans", replans}};
}

nlohmann::json EngineService::pareto(const std::string& model, std::optional<Characteristics> c) const {
  const Served& s = find(model);
  const Characteristics ch = c ? *c : s.plan_for;
  const sched::SystemSpec spec = s.planner->system_spec({});
  const sched::AdditiveCostModel cm = s.planner->cost_model(spec, ch);
  const sched::CostTables tables(spec, cm);
  nlohmann::json plans = nlohmann::json::array();
  for (const sched::Plan& p : sched::pareto_front(tables)) plans.push_back(sched::to_json(p));
  return {{"model", s.name}, {"source", "modelled"},
          {"characteristics", {{"nodes", ch.nodes}, {"nnz", ch.nnz}, {"feature_len", ch.feature_len},
                               {"seq_len", ch.seq_len}, {"window", ch.window}}},
          {"plans", plans}};
}

void EngineService::set_mode(const std::string& mode) {
  if (mode != "perf" && mode != "energy" && mode != "balanced" && mode != "qos")
    throw InputError("mode", "'" + mode + "' is not one of perf, energy, balanced, qos");
  std::lock_guard lock(mode_mu_);
  for (auto& s : served_) s->engine->set_mode(mode);
  mode_ = mode;
}

std::string EngineService::mode() const {
  std::lock_guard lock(mode_mu_);
  return mode_;
}

std::string EngineService::metrics_text() const {
  std::ostringstream o;
  o << "# HELP dype_plan_epoch Current plan epoch per model.\n# TYPE dype_plan_epoch gauge\n";
  for (const auto& s : served_) o << "dype_plan_epoch{model=\"" << s->name << "\"} " << s->engine->epoch() << "\n";
  o << "# HELP dype_plan_info Current plan (label) and objective per model.\n# TYPE dype_plan_info gauge\n";
  for (const auto& s : served_)
    o << "dype_plan_info{model=\"" << s->name << "\",plan=\"" << esc(s->engine->current_label()) << "\",mode=\""
      << mode() << "\",pipeline=\"" << esc(describe(s->engine->current_spec())) << "\"} 1\n";
  o << "# HELP dype_replans_total Re-plans per model, cause and whether the pipeline was swapped.\n"
       "# TYPE dype_replans_total counter\n";
  for (const auto& s : served_) {
    std::map<std::pair<std::string, bool>, int> by;
    for (const ReplanRecord& r : s->engine->replans()) ++by[{r.cause, r.swapped}];
    for (const auto& [k, n] : by)
      o << "dype_replans_total{model=\"" << s->name << "\",cause=\"" << k.first << "\",swapped=\""
        << (k.second ? "true" : "false") << "\"} " << n << "\n";
  }
  o << "# HELP dype_engine_requests_total Requests the engine answered, by result.\n"
       "# TYPE dype_engine_requests_total counter\n";
  o << "# HELP dype_swap_pause_seconds_max Longest client pause during a plan swap (measured).\n"
       "# TYPE dype_swap_pause_seconds_max gauge\n";
  o << "# HELP dype_modelled_makespan_seconds Latest modelled completion on emulated devices (modelled).\n"
       "# TYPE dype_modelled_makespan_seconds gauge\n";
  for (const auto& s : served_) {
    const EngineStats st = s->engine->stats();
    o << "dype_engine_requests_total{model=\"" << s->name << "\",result=\"completed\"} " << st.completed << "\n";
    o << "dype_engine_requests_total{model=\"" << s->name << "\",result=\"failed\"} " << st.failed << "\n";
    o << "dype_engine_reruns_total{model=\"" << s->name << "\"} " << st.reruns << "\n";
    o << "dype_swap_pause_seconds_max{model=\"" << s->name << "\",source=\"measured\"} " << st.max_pause_s << "\n";
    o << "dype_modelled_makespan_seconds{model=\"" << s->name << "\",source=\"modelled\"} " << st.modelled_makespan_s << "\n";
  }
  o << "# HELP dype_stage_busy_ratio Busy time / lifetime of each stage of the current pipeline (measured).\n"
       "# TYPE dype_stage_busy_ratio gauge\n";
  for (const auto& s : served_) {
    const auto stages = s->engine->stage_stats();
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const StageStats& st = stages[i];
      const std::string l = "model=\"" + s->name + "\",stage=\"" + std::to_string(i) + "\",devices=\"" + esc(st.devices) + "\"";
      o << "dype_stage_busy_ratio{" << l << ",source=\"measured\"} " << (st.lifetime_s > 0 ? st.busy_s / st.lifetime_s : 0.0) << "\n";
      o << "dype_stage_modelled_busy_seconds{" << l << ",source=\"modelled\"} " << st.modelled_busy_s << "\n";
      o << "dype_stage_queue_depth_max{" << l << "} " << st.max_queue_depth << "\n";
      o << "dype_stage_queue_depth_mean{" << l << "} " << st.mean_queue_depth << "\n";
      o << "dype_stage_requests_total{" << l << "} " << st.requests << "\n";
    }
  }
  return o.str();
}

void EngineService::drain() {
  for (auto& s : served_) s->engine->drain();
}

}  // namespace dype::rt::daemon
