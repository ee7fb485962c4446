// EngineService's model management while serving: the model repository extension's index, load
// (first load or reload) and unload. A reload builds and plans the new version beside the serving
// one and switches the name over under the exclusive lock, so the pause a client can see is that
// switch alone; the old version's engine then finishes what it admitted and is freed.
#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "graph/generators.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/repository_models.h"
#include "runtime/host_buffer_pool.h"
#include "runtime/host_memory.h"
#include "runtime/repository/model_repository.h"

namespace dype::rt::daemon {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

double EngineService::warm(Served& s) {
  const Model& m = *s.model;
  const auto t0 = Clock::now();
  Request r = [&] {
    if (!m.is_gnn()) {
      const std::int64_t seq = 64, d = m.spec().d_model;
      return Request::transformer(make_tensor(seq, d, kernels::generate_features(seq, d, 1)), 16);
    }
    const std::int64_t n = 256, f = m.spec().in_features;
    return Request::gnn(graph_for_model(random_graph(n, 4 * n, 1), m.spec()),
                        make_tensor(n, f, kernels::generate_features(n, f, 1)));
  }();
  s.engine->submit(std::move(r)).get();
  return since(t0);
}

std::vector<std::string> EngineService::warm_up() {
  std::vector<std::shared_ptr<Served>> all;
  {
    std::shared_lock lock(served_mu_);
    all = served_;
  }
  std::vector<std::string> out;
  for (const auto& s : all) {
    try {
      out.push_back("model " + s->name + " warmed up in " + std::to_string(warm(*s) * 1e3) + " ms (measured)");
    } catch (const std::exception& e) {
      out.push_back("model " + s->name + " warm-up failed: " + e.what());
    }
  }
  return out;
}

double EngineService::retire(std::shared_ptr<Served> old, bool unloaded) {
  const auto t0 = Clock::now();
  // Callers hold an entry only between finding it and submitting to its engine: short.
  while (old.use_count() > 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (old->pricer) old->pricer->detach();  // registered graphs may hold it past this version
  old->engine.reset();  // drains: every admitted request is answered by this version
  old.reset();          // frees the model's weights (unless a ModelInfo still holds them)
  // An unloaded model's pages go back (the heap keeps them otherwise), with the receive buffers
  // kept for requests to come: the next large request makes (and pins) one again. A new version
  // keeps them, to be served without pinning again.
  if (unloaded) receive_buffers().trim();
  release_free_host_memory();
  return since(t0);
}

json EngineService::repository_index() const {
  if (options_.repositories.empty()) throw NotSupported("this server was started without a model repository");
  const ModelRepository repo(options_.repositories);
  json out = json::array();
  std::lock_guard models(models_mu_);
  std::shared_lock lock(served_mu_);
  for (const std::string& name : repo.index()) {
    json m = {{"name", name}, {"version", ""}, {"state", "UNAVAILABLE"}, {"reason", "unloaded"}};
    for (const auto& s : served_) {
      if (s->name != name) continue;
      m["version"] = std::to_string(s->version);
      m["state"] = "READY";
      m["reason"] = "";
    }
    if (const auto f = load_failures_.find(name); f != load_failures_.end() && m["state"] != "READY") m["reason"] = f->second;
    out.push_back(m);
  }
  return out;
}

namespace {
void check_control(bool on) {
  if (!on) throw NotSupported("models are not loaded or unloaded while serving: dype-serve runs with --model-control-mode none (use explicit)");
}
}  // namespace

json EngineService::load_model(const std::string& name, const std::optional<std::string>& config_yaml) {
  check_control(options_.model_control);
  std::lock_guard models(models_mu_);
  return do_load(name, config_yaml);
}

json EngineService::do_load(const std::string& name, const std::optional<std::string>& config_yaml) {
  if (options_.repositories.empty()) throw NotSupported("this server was started without a model repository");
  const auto t0 = Clock::now();
  std::shared_ptr<Served> fresh;
  try {
    const ModelRepository repo(options_.repositories);
    const auto names = repo.index();
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw NotFound("model '" + name + "' is not in the model repository");
    const RepositoryModel loaded = repo.load(name, config_yaml);
    fresh = make_served(served_model(loaded));
    devices_->admit(*fresh->engine, name);
    warm(*fresh);  // the first request after the switch does not pay the cold start
  } catch (const NotFound&) {
    throw;
  } catch (const std::exception& e) {
    load_failures_[name] = e.what();
    throw;
  }
  load_failures_.erase(name);
  const double build_s = since(t0);
  std::shared_ptr<Served> old;
  double pause_s = 0.0;
  {
    // The mode may have changed while the new version was planned.
    std::lock_guard mode(mode_mu_);
    if (fresh->mode != mode_) fresh->engine->set_mode(fresh->mode = mode_);
    const auto t1 = Clock::now();
    std::unique_lock lock(served_mu_);
    auto it = std::find_if(served_.begin(), served_.end(), [&](const auto& s) { return s->name == name; });
    if (it == served_.end()) {
      served_.push_back(fresh);
    } else {
      old = *it;
      *it = fresh;
    }
    index_engines_locked();
    devices_->set_engines(engines_);
    pause_s = since(t1);
  }
  const std::int64_t previous = old ? old->version : 0;
  const double drain_s = old ? retire(std::move(old)) : 0.0;
  spdlog::info("model {} version {} loaded{} in {:.3f} s: switch paused admission {:.3f} ms, old version drained in {:.3f} s",
               name, fresh->version, previous ? " (replacing version " + std::to_string(previous) + ")" : "", build_s,
               pause_s * 1e3, drain_s);
  return {{"model", name},
          {"version", std::to_string(fresh->version)},
          {"previous_version", previous ? json(std::to_string(previous)) : json(nullptr)},
          {"plan", fresh->engine->current_label()},
          {"load_s", build_s},
          {"switch_pause_s", pause_s},
          {"old_version_drain_s", drain_s},
          {"source", "measured"}};
}

std::shared_ptr<EngineService::Served> EngineService::take(const std::string& name) {
  std::unique_lock lock(served_mu_);
  auto it = std::find_if(served_.begin(), served_.end(), [&](const auto& s) { return s->name == name; });
  if (it == served_.end()) return nullptr;
  std::shared_ptr<Served> old = *it;
  served_.erase(it);
  index_engines_locked();
  devices_->set_engines(engines_);
  return old;
}

json EngineService::unload_model(const std::string& name) {
  check_control(options_.model_control);
  std::lock_guard models(models_mu_);
  std::shared_ptr<Served> old = take(name);
  if (!old) throw NotFound("unknown model '" + name + "'");
  const std::int64_t version = old->version;
  const double drain_s = retire(std::move(old), /*unloaded=*/true);
  spdlog::info("model {} version {} unloaded: admitted requests finished in {:.3f} s", name, version, drain_s);
  return {{"model", name}, {"version", std::to_string(version)}, {"unloaded", true}, {"drain_s", drain_s},
          {"source", "measured"}};
}

std::vector<std::string> EngineService::poll_repository() {
  std::vector<std::string> changes;
  std::lock_guard models(models_mu_);
  const ModelRepository repo(options_.repositories);
  const std::vector<std::string> names = repo.index();
  std::map<std::string, std::string> serving;  // name -> fingerprint, repository models only
  {
    std::shared_lock lock(served_mu_);
    for (const auto& s : served_)
      if (!s->fingerprint.empty()) serving[s->name] = s->fingerprint;
  }
  for (const std::string& name : names) {
    const std::string now = repo.fingerprint(name);
    const auto it = serving.find(name);
    if (it != serving.end() && it->second == now) continue;
    if (const auto f = failed_fingerprints_.find(name); f != failed_fingerprints_.end() && f->second == now) continue;
    try {
      const json j = do_load(name, std::nullopt);
      failed_fingerprints_.erase(name);
      changes.push_back("model '" + name + "' " + (it == serving.end() ? "loaded" : "reloaded") + ", version " +
                        j["version"].get<std::string>());
    } catch (const std::exception& e) {
      failed_fingerprints_[name] = now;
      changes.push_back("model '" + name + "' not " + (it == serving.end() ? "loaded" : "reloaded") + ": " + e.what());
    }
  }
  for (const auto& [name, fp] : serving) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    std::shared_ptr<Served> old = take(name);
    if (!old) continue;
    retire(std::move(old), /*unloaded=*/true);
    changes.push_back("model '" + name + "' unloaded: its folder is gone");
  }
  return changes;
}

}  // namespace dype::rt::daemon
