#include "runtime/daemon/engine_service.h"

#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "hw/system_config.h"
#include "hw/system_file.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"
#include "scheduler/recurrent.h"
#include "scheduler/solver.h"
#include "runtime/daemon/engine_metrics.h"
#include "runtime/daemon/errors.h"
#include "runtime/planning/perf_planner.h"

namespace dype::rt::daemon {

std::vector<ServedModel> default_models() {
  ModelSpec gcn{.family = ModelFamily::gcn, .layers = 2, .in_features = 64, .hidden = 128};
  ModelSpec gin{.family = ModelFamily::gin, .layers = 2, .in_features = 64, .hidden = 128};
  ModelSpec tf{.family = ModelFamily::transformer, .layers = 2, .d_model = 256, .heads = 4, .ffn = 1024, .window = 16};
  Characteristics g{.nodes = 4096, .nnz = 40960, .feature_len = 64, .degree_skew = 1.0};
  Characteristics t{.feature_len = 256, .seq_len = 1024, .window = 64};
  return {{"gcn", gcn, g}, {"gin", gin, g}, {"swin-transformer", tf, t}};
}

namespace {

// The stores of `dir` for the system's device models (<id>.json); none when dir is empty.
}  // namespace

EngineService::EngineService(EngineServiceOptions options) : options_(std::move(options)) {
  system_ = std::make_unique<hw::System>(options_.system_config.empty()
                                             ? hw::System::detect()
                                             : hw::System::from_config(hw::load_system_config(options_.system_config)));
  hosts_ = std::make_shared<HostDirectory>(system_->config());
  if (options_.models.empty()) options_.models = default_models();
  mode_ = options_.mode;
  utilisation_ = std::make_shared<UtilisationObserver>();
  options_.engine.observers.push_back(utilisation_);  // every engine, those loaded later too
  const hw::SystemConfig& sc = system_->config();
  spdlog::info("transfers: {} ({})", sc.overlap_transfers ? "overlap" : "serial", sc.transfers_why);
  PlanningStores found = load_planning_stores(
      *system_, {.perfmodels_dir = options_.perfmodels_dir,
                 .state_dir = options_.state_dir,
                 .budget_s = options_.startup_profile_s,
                 .log = [](const std::string& line) { spdlog::info("start-up measurement: {}", line); }});
  for (const std::string& w : found.warnings) spdlog::warn("performance models: {}", w);
  planning_ = describe_device_planning(*system_, found);
  for (const DevicePlanning& p : planning_) {
    if (p.warning) spdlog::warn("{}", p.summary());
    else spdlog::info("{}", p.summary());
  }
  stores_ = std::move(found.stores);
  if (!options_.state_dir.empty() && !stores_.empty()) refined_ = std::make_unique<RefinedModelsDir>(options_.state_dir);
  // A model that cannot be planned on this system (a kernel no device runs) is reported and left
  // out; the others serve. Nothing to serve at all is an error.
  std::string failed;
  for (const ServedModel& m : options_.models) {
    try {
      served_.push_back(make_served(m));
    } catch (const Error& e) {
      load_failures_[m.name] = e.what();
      spdlog::error("model '{}' not served: {}", m.name, e.what());
      failed += (failed.empty() ? "" : "; ") + ("model '" + m.name + "': " + e.what());
    }
  }
  if (served_.empty() && !failed.empty()) throw Error("no model can be served: " + failed);
  index_engines_locked();
  devices_ = std::make_unique<DeviceAdmin>(*system_, engines_, hosts_);
}

ModelInfo EngineService::Served::info() const {
  ModelInfo i = describe_model(name, model, version);
  i.batching = batching;
  return i;
}

std::shared_ptr<EngineService::Served> EngineService::make_served(const ServedModel& m) {
  auto s = std::make_shared<Served>();
  s->name = m.name;
  s->plan_for = m.plan_for;
  s->model = m.model ? m.model : std::make_shared<const Model>(Model::make(m.spec));
  s->version = m.version;
  s->fingerprint = m.fingerprint;
  s->batching = m.batching;
  EngineOptions eo = options_.engine;
  eo.mode = s->mode = mode();
  std::shared_ptr<PerfModelPlanner> fitted;
  if (!stores_.empty()) {
    // Each model refines its own copy: its launches' shapes are what its plans depend on.
    std::vector<perf::ModelStore> stores = stores_;
    if (refined_) {
      std::vector<std::string> notes;
      stores = refined_->load(m.name, std::move(stores), notes);
      std::lock_guard lock(save_mu_);
      for (const std::string& n : notes) {
        if (n.rfind("warning: ", 0) == 0) spdlog::warn("refined models: {}", n.substr(9));
        else spdlog::info("refined models: {}", n);
        refined_notes_.push_back(n);
      }
    }
    fitted = std::make_shared<PerfModelPlanner>(*s->model, *system_, std::move(stores));
    cost_source_ = fitted->cost_source();
    s->planner = fitted;
  } else {
    s->planner = std::make_shared<SchedPlanner>(*s->model, *system_);
  }
  // Given before the first pipeline is built: add_observer would reach only pipelines built after a
  // re-plan, and the models would not refine until then.
  if (fitted) eo.observers.push_back(fitted);
  s->epochs = std::make_shared<EpochObserver>();
  eo.observers.push_back(s->epochs);
  if (!system_->config().hosts.empty()) {
    if (!options_.remote_stages)
      throw InputError("system.hosts", "the system spans hosts but this daemon has no remote stage support");
    eo.prepare_spec = options_.remote_stages(hosts_, system_->config(), s->name, *s->model);
    // A host that has not joined yet is out of plans until it does (join_host).
    for (const auto& h : hosts_->hosts())
      if (h.address.empty())
        for (const std::string& d : system_->config().devices_on(h.name)) eo.absent_devices.insert(d);
    // A stage server that stops answering takes every device of its host with it.
    eo.failure_domain = [cfg = system_->config()](const std::string& device) {
      const std::string host = cfg.remote_host(device);
      return host.empty() ? std::vector<std::string>{device} : cfg.devices_on(host);
    };
  }
  s->engine = std::make_unique<Engine>(*s->model, s->planner, m.plan_for, eo);
  if (s->model->is_gnn() && s->planner) {
    Engine* engine = s->engine.get();  // detached (retire) before the engine goes
    s->pricer = std::make_shared<IncrementalPricer>(s->model, s->planner, [engine] {
      Engine::PlanningState st = engine->planning_state();
      return std::optional{std::pair{st.mode, st.left_out}};
    });
  }
  return s;
}

std::vector<std::string> EngineService::save_refined() const {
  std::vector<std::string> lines;
  if (!refined_) return lines;
  std::vector<std::shared_ptr<Served>> served;
  {
    std::shared_lock lock(served_mu_);
    served = served_;
  }
  std::lock_guard lock(save_mu_);
  for (const auto& s : served) {
    const auto* fitted = dynamic_cast<const PerfModelPlanner*>(s->planner.get());
    if (!fitted) continue;
    refined_->save(s->name, fitted->stores());
    const auto c = fitted->counters();
    lines.push_back(s->name + ": " + std::to_string(c.accepted) + " refinements this run -> " + refined_->path_of(s->name));
  }
  return lines;
}

std::vector<std::string> EngineService::refined_notes() const {
  std::lock_guard lock(save_mu_);
  return refined_notes_;
}

void EngineService::index_engines_locked() {
  engines_.clear();
  for (const auto& s : served_) engines_.push_back({s->name, s->engine.get()});
}

EngineService::~EngineService() {
  // Engines drain in their destructors; they must go before the models and system they use.
  for (auto& s : served_) {
    if (s->pricer) s->pricer->detach();  // registered graphs may outlive the service
    s->engine.reset();
  }
}

std::shared_ptr<EngineService::Served> EngineService::find(const std::string& name) const {
  std::shared_lock lock(served_mu_);
  for (const auto& s : served_)
    if (s->name == name) return s;
  throw NotFound("unknown model '" + name + "'");
}

std::vector<ModelInfo> EngineService::models() const {
  std::shared_lock lock(served_mu_);
  std::vector<ModelInfo> out;
  for (const auto& s : served_) out.push_back(s->info());
  return out;
}

ModelInfo EngineService::model(const std::string& name) const {
  const auto s = find(name);
  return s->info();
}

bool EngineService::model_ready(const std::string& name) const { return find(name)->engine != nullptr; }

std::future<HostTensor> EngineService::infer(const std::string& model, Request request, std::int64_t* version) {
  // The entry is held (not the lock) while submitting, which may wait for room in the engine: a
  // reload's switch never waits on a busy engine, and the version reported is the one whose engine
  // takes the request (an old version retires only once no caller holds it).
  const std::shared_ptr<Served> s = find(model);
  if (version) *version = s->version;
  return s->engine->submit(std::move(request));
}

bool EngineService::try_infer(const std::string& model, Request& request, std::int64_t* version, InferDone& done) {
  const std::shared_ptr<Served> s = find(model);  // held while submitting, as in infer()
  if (!s->engine->try_submit(request, std::move(done))) return false;
  if (version) *version = s->version;
  return true;
}

Engine& EngineService::engine(const std::string& model) { return *find(model)->engine; }

std::shared_ptr<IncrementalPricer> EngineService::incremental_pricer(const std::string& model) const {
  return find(model)->pricer;
}

nlohmann::json EngineService::plan(const std::string& model) const {
  const auto held = find(model);
  const Served& s = *held;
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
  // Kernel times behind the predictions: fitted models (refined online) or the devices' own.
  const auto* fitted = dynamic_cast<const PerfModelPlanner*>(s.planner.get());
  return {{"model", s.name}, {"mode", mode()}, {"epoch", s.engine->epoch()}, {"label", s.engine->current_label()},
          {"pipeline", describe(spec)}, {"stages", stages}, {"replans", replans},
          {"cost_source", fitted ? fitted->cost_source() : std::string("device models")}};
}

nlohmann::json EngineService::pareto(const std::string& model, std::optional<Characteristics> c) const {
  const auto held = find(model);
  const Served& s = *held;
  const Characteristics ch = c ? *c : s.plan_for;
  const sched::SystemSpec spec = s.planner->system_spec({});
  const auto cm = s.planner->cost_model(spec, ch);
  // Over the flat chain and every layer-recurrent shape, as the planner solves.
  nlohmann::json plans = nlohmann::json::array();
  for (const sched::Plan& p : sched::pareto_front_shapes(spec, cm, recurrent_shapes(*s.model)))
    plans.push_back(sched::to_json(p));
  return {{"model", s.name}, {"source", "modelled"},
          {"characteristics", {{"nodes", ch.nodes}, {"nnz", ch.nnz}, {"feature_len", ch.feature_len},
                               {"seq_len", ch.seq_len}, {"window", ch.window}}},
          {"plans", plans}};
}

void EngineService::set_mode(const std::string& mode) {
  if (mode != "perf" && mode != "energy" && mode != "balanced" && mode != "qos" && mode != "latency")
    throw InputError("mode", "'" + mode + "' is not one of perf, energy, balanced, qos, latency");
  std::lock_guard lock(mode_mu_);
  std::shared_lock served(served_mu_);
  for (auto& s : served_) {
    s->engine->set_mode(mode);
    s->mode = mode;
  }
  mode_ = mode;
}

std::string EngineService::mode() const {
  std::lock_guard lock(mode_mu_);
  return mode_;
}

std::string EngineService::metrics_text() const {
  const std::string m = mode();
  std::shared_lock lock(served_mu_);
  return render_engine_metrics(engines_, m, *system_, utilisation_.get());
}

void EngineService::drain() {
  std::vector<std::shared_ptr<Served>> all;
  {
    std::shared_lock lock(served_mu_);
    all = served_;
  }
  for (auto& s : all) s->engine->drain();
}

// Device administration: DeviceAdmin (device_admin.h) does it for every served engine.
nlohmann::json EngineService::set_device_drained(const std::string& device, bool drained) {
  return devices_->set_device_drained(device, drained);
}

nlohmann::json EngineService::set_devices_drained(const std::vector<std::string>& devices, bool drained,
                                                  const std::string& what) {
  return devices_->set_devices_drained(devices, drained, what);
}

nlohmann::json EngineService::load_bitstream(const std::string& device, const std::string& manifest_path) {
  return devices_->load_bitstream(device, manifest_path);
}

nlohmann::json EngineService::unload_bitstream(const std::string& device) { return devices_->unload_bitstream(device); }

nlohmann::json EngineService::choose_images(const std::string& model, double horizon, bool apply) {
  const auto held = find(model);
  nlohmann::json out = devices_->choose_images(*held->planner, held->engine->planning_state(), horizon, apply);
  out["model"] = held->name;
  return out;
}

nlohmann::json EngineService::devices() const {
  nlohmann::json j = devices_->devices();
  for (auto& d : j["devices"])
    for (const DevicePlanning& p : planning_)
      if (p.device == d.value("name", "")) d["planning"] = p.to_json();
  const hw::SystemConfig& sc = system_->config();
  j["transfers"] = {{"mode", sc.overlap_transfers ? "overlap" : "serial"}, {"why", sc.transfers_why}};
  return j;
}

AdminHooks admin_hooks(EngineService& service) {
  AdminHooks h;
  h.drain_device = [&service](const std::string& d, bool drain) { return service.set_device_drained(d, drain); };
  h.pareto = [&service](const std::string& m) { return service.pareto(m); };
  h.load_bitstream = [&service](const std::string& d, const std::string& p) { return service.load_bitstream(d, p); };
  h.unload_bitstream = [&service](const std::string& d) { return service.unload_bitstream(d); };
  h.choose_images = [&service](const std::string& m, double horizon, bool apply) {
    return service.choose_images(m, horizon, apply);
  };
  h.devices = [&service] { return service.devices(); };
  h.status = [&service] { return service.status(); };
  h.status_devices = [&service] { return service.status_devices(); };
  if (!service.system().config().hosts.empty()) {
    h.hosts = [&service] { return service.hosts(); };
    h.host_devices = [&service](const std::string& host) { return service.host_devices(host); };
    h.drain_devices = [&service](const std::vector<std::string>& devices, bool drain, const std::string& what) {
      return service.set_devices_drained(devices, drain, what);
    };
    h.join_host = [&service](const std::string& host, const std::string& address, const nlohmann::json& devices) {
      return service.join_host(host, address, devices);
    };
  }
  h.repository_index = [&service] { return service.repository_index(); };
  h.load_model = [&service](const std::string& m, const std::optional<std::string>& config) {
    return service.load_model(m, config);
  };
  h.unload_model = [&service](const std::string& m) { return service.unload_model(m); };
  return h;
}

}  // namespace dype::rt::daemon
