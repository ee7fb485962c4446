#include "runtime/daemon/engine_service.h"

#include <filesystem>
#include <set>
#include <sstream>

#include "hw/event.h"
#include "hw/system_config.h"
#include "scheduler/cost_tables.h"
#include "scheduler/plan.h"
#include "scheduler/solver.h"
#include "runtime/daemon/errors.h"
#include "runtime/perf_planner.h"

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

namespace {

// The stores of `dir` for the system's device models (<id>.json); none when dir is empty.
std::vector<perf::ModelStore> load_perfmodels(const hw::System& system, const std::string& perfmodels_dir) {
  std::vector<perf::ModelStore> stores;
  if (perfmodels_dir.empty()) return stores;
  const std::filesystem::path dir(perfmodels_dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw InputError("perfmodels " + dir.string(), "not a directory");
  std::set<std::string> seen;
  for (const hw::Device* d : system.devices()) {
    const std::string id = device_model_id(system, *d);
    if (id.empty() || !seen.insert(id).second) continue;
    const std::filesystem::path file = dir / (id + ".json");
    if (std::filesystem::exists(file, ec)) stores.push_back(perf::ModelStore::load(file, id));
  }
  return stores;
}

}  // namespace

EngineService::EngineService(EngineServiceOptions options) : options_(std::move(options)) {
  system_ = std::make_unique<hw::System>(options_.system_config.empty()
                                             ? hw::System::detect()
                                             : hw::System::from_config(hw::load_system_config(options_.system_config)));
  if (options_.models.empty()) options_.models = default_models();
  mode_ = options_.mode;
  EngineOptions eo = options_.engine;
  eo.mode = mode_;
  const std::vector<perf::ModelStore> stores = load_perfmodels(*system_, options_.perfmodels_dir);
  for (const ServedModel& m : options_.models) {
    auto s = std::make_unique<Served>();
    s->name = m.name;
    s->plan_for = m.plan_for;
    s->model = std::make_unique<Model>(Model::make(m.spec));
    std::shared_ptr<PerfModelPlanner> fitted;
    if (!stores.empty()) {
      // Each model refines its own copy: its launches' shapes are what its plans depend on.
      fitted = std::make_shared<PerfModelPlanner>(*s->model, *system_, stores);
      cost_source_ = fitted->cost_source();
      s->planner = fitted;
    } else {
      s->planner = std::make_shared<SchedPlanner>(*s->model, *system_);
    }
    s->engine = std::make_unique<Engine>(*s->model, s->planner, m.plan_for, eo);
    if (fitted) s->engine->add_observer(fitted);
    served_.push_back(std::move(s));
  }
  // FPGAs configured with another image than the first FPGA are held out (see load_bitstream).
  const auto held = mismatched_fpgas();
  if (!held.empty()) apply_left_out(held, "bitstream", "FPGAs whose bitstream differs from the first FPGA's");
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
  // Kernel times behind the predictions: fitted models (refined online) or the devices' own.
  const auto* fitted = dynamic_cast<const PerfModelPlanner*>(s.planner.get());
  return {{"model", s.name}, {"mode", mode()}, {"epoch", s.engine->epoch()}, {"label", s.engine->current_label()},
          {"pipeline", describe(spec)}, {"stages", stages}, {"replans", replans},
          {"cost_source", fitted ? fitted->cost_source() : std::string("device models")}};
}

nlohmann::json EngineService::pareto(const std::string& model, std::optional<Characteristics> c) const {
  const Served& s = find(model);
  const Characteristics ch = c ? *c : s.plan_for;
  const sched::SystemSpec spec = s.planner->system_spec({});
  const auto cm = s.planner->cost_model(spec, ch);
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
    for (const auto& [k, n] : s->engine->replan_counts())
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
  o << "# HELP dype_inference_energy_joules_total Energy of the answered inferences: per stage, modelled busy time x\n"
       "# execute power of its devices (emulated device models).\n# TYPE dype_inference_energy_joules_total counter\n";
  o << "# HELP dype_inference_energy_joules Mean energy per answered inference (modelled).\n"
       "# TYPE dype_inference_energy_joules gauge\n";
  for (const auto& s : served_) {
    const EngineStats st = s->engine->stats();
    const std::string l = "model=\"" + s->name + "\",source=\"modelled\"";
    o << "dype_inference_energy_joules_total{" << l << "} " << st.modelled_energy_j << "\n";
    o << "dype_inference_energy_joules{" << l << "} " << (st.completed ? st.modelled_energy_j / static_cast<double>(st.completed) : 0.0) << "\n";
  }
  o << "# HELP dype_device_energy_joules_total Energy per device since start (modelled on emulated devices,\n"
       "# measured where the backend reads a power meter).\n# TYPE dype_device_energy_joules_total counter\n";
  for (const hw::Device* d : system_->devices()) {
    const auto e = d->energy();
    if (!e) continue;
    const char* src = dynamic_cast<const hw::EmuDevice*>(d) ? "modelled" : "measured";
    o << "dype_device_energy_joules_total{device=\"" << d->name() << "\",state=\"execute\",source=\"" << src << "\"} " << e->execute_j << "\n";
    o << "dype_device_energy_joules_total{device=\"" << d->name() << "\",state=\"transfer\",source=\"" << src << "\"} " << e->transfer_j << "\n";
    o << "dype_device_energy_joules_total{device=\"" << d->name() << "\",state=\"idle\",source=\"" << src << "\"} " << e->idle_j << "\n";
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

namespace dype::rt::daemon {

using json = nlohmann::json;

namespace {
std::string image_of(const hw::EmuDevice& d) { return d.bitstream() ? d.bitstream()->name : "none"; }
}  // namespace

hw::EmuDevice& EngineService::emulated_fpga(const std::string& device) const {
  hw::Device* d = system_->find(device);
  if (!d) throw NotFound("unknown device '" + device + "'");
  auto* emu = dynamic_cast<hw::EmuDevice*>(d);
  if (!emu || d->kind() != hw::DeviceKind::fpga)
    throw InputError("device", "'" + device + "' is not an emulated FPGA (bitstreams load onto emu-backend FPGAs)");
  return *emu;
}

std::set<std::string> EngineService::mismatched_fpgas(const std::string& device, const std::string& image) const {
  std::set<std::string> out;
  const auto fpgas = system_->devices_of(hw::DeviceKind::fpga);
  auto image_now = [&](const hw::Device* d) -> std::optional<std::string> {
    if (!device.empty() && d->name() == device) return image;
    if (const auto* e = dynamic_cast<const hw::EmuDevice*>(d)) return image_of(*e);
    return std::nullopt;  // not emulated: no image to compare
  };
  if (fpgas.empty()) return out;
  const auto ref = image_now(fpgas.front());
  if (!ref) return out;
  for (const hw::Device* d : fpgas) {
    const auto im = image_now(d);
    if (im && *im != *ref) out.insert(d->name());
  }
  return out;
}

void EngineService::apply_left_out(const std::set<std::string>& left_out, const std::string& cause,
                                   const std::string& detail) {
  for (auto& s : served_) {
    const std::set<std::string> now = s->engine->drained_devices();
    for (const std::string& d : left_out)
      if (!now.count(d) && !s->engine->drain_device(d, cause, detail, 60.0))
        throw Error("model " + s->name + ": requests still running on " + d + " after 60 s");
    for (const std::string& d : now)
      if (!left_out.count(d)) s->engine->undrain_device(d, cause, detail);
  }
}

EngineService::Snapshot EngineService::snapshot() const {
  Snapshot snap;
  for (const auto& s : served_) {
    snap.specs.push_back(s->engine->current_spec());
    snap.labels.push_back(s->engine->current_label());
    snap.drained.push_back(s->engine->drained_devices());
  }
  return snap;
}

void EngineService::restore(const Snapshot& snap, const std::string& detail) {
  for (std::size_t i = 0; i < served_.size() && i < snap.specs.size(); ++i) {
    Engine& e = *served_[i]->engine;
    if (e.drained_devices() == snap.drained[i] && describe(e.current_spec()) == describe(snap.specs[i])) continue;
    e.restore(snap.specs[i], snap.labels[i], snap.drained[i], detail);
  }
}

json EngineService::plan_labels() const {
  json out = json::object();
  for (const auto& s : served_) out[s->name] = s->engine->current_label();
  return out;
}

json EngineService::set_device_drained(const std::string& device, bool drained) {
  std::lock_guard lock(admin_mu_);
  if (!system_->find(device)) throw NotFound("unknown device '" + device + "'");
  const Snapshot before = snapshot();
  const std::set<std::string> was = operator_drained_;
  if (drained) operator_drained_.insert(device);
  else operator_drained_.erase(device);
  const std::string detail = std::string("operator ") + (drained ? "drained " : "undrained ") + device;
  try {
    std::set<std::string> out = operator_drained_;
    for (const std::string& d : mismatched_fpgas()) out.insert(d);
    apply_left_out(out, drained ? "drain" : "undrain", detail);
  } catch (const std::exception& e) {
    operator_drained_ = was;
    restore(before, "rollback: " + detail + " failed");
    throw RolledBack(std::string(drained ? "draining " : "undraining ") + device + " failed: " + e.what() +
                     "; the previous plans are restored");
  }
  const auto held = mismatched_fpgas();
  return {{"device", device}, {"drained", operator_drained_.count(device) > 0}, {"held_out", held.count(device) > 0},
          {"plans", plan_labels()}};
}

json EngineService::load_bitstream(const std::string& device, const std::string& manifest_path) {
  std::lock_guard lock(admin_mu_);
  hw::EmuDevice& fpga = emulated_fpga(device);
  const hw::Bitstream bs = hw::load_bitstream(manifest_path);  // InputError names the file and key
  if (bs.device_model != fpga.model().id)
    throw InputError("path", "bitstream '" + bs.name + "' is built for '" + bs.device_model + "', " + device +
                                 " is a '" + fpga.model().id + "'");
  const std::optional<hw::Bitstream> previous =
      fpga.bitstream() ? std::optional<hw::Bitstream>(*fpga.bitstream()) : std::nullopt;
  const std::string prev_name = image_of(fpga);
  const Snapshot before = snapshot();
  const std::set<std::string> was_drained = operator_drained_;
  const std::string detail = device + ": bitstream " + prev_name + " -> " + bs.name;
  const double t0 = hw::now_s();
  double load_s = 0.0;
  try {
    // Out of every plan first, with the FPGAs that do not match the kind's first one before or
    // after the swap (the planner times the kind on the first FPGA even while it is drained).
    std::set<std::string> out = operator_drained_;
    out.insert(device);
    for (const std::string& d : mismatched_fpgas(device, bs.name)) out.insert(d);
    for (const std::string& d : mismatched_fpgas()) out.insert(d);
    apply_left_out(out, "bitstream", detail + " (draining " + device + ")");
    const hw::Event ev = fpga.load_bitstream(bs);  // the modelled reconfiguration time passes here
    load_s = ev.end_s - ev.start_s;
    operator_drained_.erase(device);  // a loaded image puts an unloaded or drained FPGA back in service
    std::set<std::string> back = operator_drained_;
    for (const std::string& d : mismatched_fpgas()) back.insert(d);
    apply_left_out(back, "bitstream", detail);
  } catch (const std::exception& e) {
    operator_drained_ = was_drained;
    std::string undo;
    if (image_of(fpga) != prev_name) {
      try {
        if (previous) fpga.load_bitstream(*previous);
        else fpga.unload_bitstream();
      } catch (const std::exception& e2) {
        undo = std::string("; reloading ") + prev_name + " failed too (" + e2.what() + "), " + device +
               " stays drained";
        operator_drained_.insert(device);
      }
    }
    if (undo.empty()) {
      restore(before, "rollback: " + detail + " failed");
    } else {
      try {
        std::set<std::string> out = operator_drained_;
        for (const std::string& d : mismatched_fpgas()) out.insert(d);
        apply_left_out(out, "rollback", detail + " failed");
      } catch (const std::exception&) {
      }
    }
    throw RolledBack("loading bitstream '" + bs.name + "' onto " + device + " failed: " + e.what() +
                     "; rolled back to bitstream " + prev_name + " and the previous plans" + undo);
  }
  json kernels = json::array();
  for (const hw::BitstreamKernel& k : bs.kernels) kernels.push_back({{"op", std::string(kernels::to_string(k.op))}, {"design", k.design}});
  return {{"device", device},         {"bitstream", bs.name},
          {"previous", prev_name},    {"file", bs.file},
          {"kernels", kernels},       {"load_time_s", load_s},
          {"load_time_source", "modelled"}, {"swap_s", hw::now_s() - t0},
          {"swap_source", "measured"}, {"held_out", mismatched_fpgas()},
          {"plans", plan_labels()}};
}

json EngineService::unload_bitstream(const std::string& device) {
  std::lock_guard lock(admin_mu_);
  hw::EmuDevice& fpga = emulated_fpga(device);
  const std::optional<hw::Bitstream> previous =
      fpga.bitstream() ? std::optional<hw::Bitstream>(*fpga.bitstream()) : std::nullopt;
  const std::string prev_name = image_of(fpga);
  const Snapshot before = snapshot();
  const std::set<std::string> was_drained = operator_drained_;
  const std::string detail = device + ": bitstream " + prev_name + " unloaded";
  try {
    operator_drained_.insert(device);  // an FPGA without an image runs nothing: keep it out
    std::set<std::string> out = operator_drained_;
    for (const std::string& d : mismatched_fpgas(device, "none")) out.insert(d);
    for (const std::string& d : mismatched_fpgas()) out.insert(d);
    apply_left_out(out, "bitstream", detail);
    fpga.unload_bitstream();
  } catch (const std::exception& e) {
    operator_drained_ = was_drained;
    restore(before, "rollback: " + detail + " failed");
    throw RolledBack("unloading " + device + " failed: " + e.what() + "; the previous plans are restored");
  }
  return {{"device", device}, {"previous", prev_name}, {"bitstream", "none"}, {"drained", true},
          {"held_out", mismatched_fpgas()}, {"plans", plan_labels()}};
}

json EngineService::devices() const {
  std::set<std::string> drained;
  {
    // operator_drained_ changes only under admin_mu_, which the caller (AdminApi) serialises with.
    drained = operator_drained_;
  }
  const auto held = mismatched_fpgas();
  json out = json::array();
  for (const hw::Device* d : system_->devices()) {
    json j = {{"name", d->name()}, {"kind", std::string(hw::to_string(d->kind()))}, {"drained", drained.count(d->name()) > 0},
              {"held_out", held.count(d->name()) > 0}};
    const auto* emu = dynamic_cast<const hw::EmuDevice*>(d);
    j["backend"] = emu ? "emu" : "native";
    if (emu && d->kind() == hw::DeviceKind::fpga) j["bitstream"] = image_of(*emu);
    if (const auto e = d->energy()) {
      j["energy_j"] = e->total_j();
      j["energy_source"] = emu ? "modelled" : "measured";
    }
    out.push_back(j);
  }
  return {{"devices", out}};
}

AdminHooks admin_hooks(EngineService& service) {
  AdminHooks h;
  h.drain_device = [&service](const std::string& d, bool drain) { return service.set_device_drained(d, drain); };
  h.pareto = [&service](const std::string& m) { return service.pareto(m); };
  h.load_bitstream = [&service](const std::string& d, const std::string& p) { return service.load_bitstream(d, p); };
  h.unload_bitstream = [&service](const std::string& d) { return service.unload_bitstream(d); };
  h.devices = [&service] { return service.devices(); };
  return h;
}

}  // namespace dype::rt::daemon
