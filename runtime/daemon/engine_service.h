#pragma once
// EngineService: InferenceService on the real runtime. One rt::Engine per served model, all on one
// hw::System (a config file, or what the host has), each planned by the DyPe scheduler
// (rt::SchedPlanner) for the configured objective, re-planning on drift.
//
//   EngineService svc({.system_config = "configs/systems/paper-testbed-pcie4.yaml", .mode = "balanced"});
//   auto y = svc.infer("gcn", request).get();
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "hw/system.h"
#include "runtime/daemon/admin/admin.h"
#include "runtime/daemon/admin/device_admin.h"
#include "runtime/daemon/refined_models.h"
#include "runtime/daemon/served_engine.h"
#include "runtime/daemon/service.h"
#include "runtime/planning/device_planning.h"
#include "runtime/engine.h"
#include "runtime/epoch_observer.h"
#include "runtime/host_directory.h"
#include "runtime/planning/planner.h"
#include "runtime/utilisation_observer.h"
#include "perfmodel/model_store.h"

namespace dype::rt::daemon {

struct ServedModel {
  std::string name;      // the protocol's model name
  ModelSpec spec;        // built with seeded weights when `model` is not given
  Characteristics plan_for;  // what the first plan is made for, until requests say otherwise
  std::shared_ptr<const Model> model = nullptr;  // trained weights (a model repository entry)
  std::int64_t version = 1;
  std::string fingerprint = "";  // its repository folder's state when read (empty: not from one)
  std::optional<DynamicBatching> batching = std::nullopt;  // config.yaml's dynamic_batching
};

struct EngineServiceOptions {
  std::string system_config;  // empty: detect the host
  std::string mode = "perf";
  std::vector<ServedModel> models;  // empty: default_models()
  EngineOptions engine;
  // Fitted performance models (dype-profile's stores): <device model id>.json in this folder for
  // each device model of the system that has one; the planners predict with them (refined online
  // from every launch) and fall back to the devices' own models for the rest. Empty: plan on the
  // devices' own models only.
  std::string perfmodels_dir;
  // dype-serve --state-dir: each model's refined performance models are restored from
  // DIR/refined/<model>.json at start and saved there by save_refined() (refined_models.h).
  std::string state_dir;
  // dype-serve --startup-profile-secs: a real accelerator with no fitted store for its device model
  // (in perfmodels_dir, or kept in state_dir by an earlier start) is timed for this long at start
  // and planned with the fitted result (runtime/planning/startup_profile.h); 0: planned from its profile.
  double startup_profile_s = 20;
  // Model repositories (runtime/repository/) the repository API loads from at run time; the
  // models served at start are `models` (repository_models() reads them from the same folders).
  std::vector<std::string> repositories;
  // false (tritonserver's --model-control-mode none): the repository API only lists; load and
  // unload are refused (NotSupported).
  bool model_control = true;
  // Multi-host systems (hw::SystemConfig::hosts): per served model, what attaches its pipelines'
  // stages on other hosts to those hosts' stage servers (EngineOptions::prepare_spec;
  // dype-serve gives runtime/remote/remote_stages.h). Unset on a multi-host system: refused.
  // `hosts`: where each other host is now (its address from the file or its join).
  std::function<std::function<void(PipelineSpec&)>(std::shared_ptr<const HostDirectory> hosts,
                                                    const hw::SystemConfig& system, const std::string& model_name,
                                                    const Model& model)>
      remote_stages;
};

// gcn, gin (in_features 64, hidden 128) and swin-transformer (d_model 256, 4 heads) with first
// plans for mid-size inputs.
std::vector<ServedModel> default_models();

class EngineService final : public InferenceService {
 public:
  explicit EngineService(EngineServiceOptions options);
  ~EngineService() override;

  std::vector<ModelInfo> models() const override;
  // Where plans take kernel times from, per device model ("amd-mi210: fitted perf model (spmm,...)").
  const std::string& cost_source() const { return cost_source_; }
  ModelInfo model(const std::string& name) const override;
  bool model_ready(const std::string& name) const override;
  std::future<HostTensor> infer(const std::string& model, Request request, std::int64_t* version = nullptr) override;
  // Engine::try_submit on the model's engine.
  bool try_infer(const std::string& model, Request& request, std::int64_t* version, InferDone& done) override;
  nlohmann::json plan(const std::string& model) const override;
  std::shared_ptr<IncrementalPricer> incremental_pricer(const std::string& model) const override;
  void set_mode(const std::string& mode) override;
  std::string mode() const override;
  std::string metrics_text() const override;
  void drain() override;

  // Pareto front (throughput, energy, devices; modelled) of a model for the characteristics its
  // first plan was made for, or `c` when given.
  nlohmann::json pareto(const std::string& model, std::optional<Characteristics> c = std::nullopt) const;

  const hw::System& system() const { return *system_; }
  Engine& engine(const std::string& model);
  // Multi-host systems: the other hosts with a device some engine holds failed, and bringing a
  // host back (its devices restored in every engine, each re-planning). Returns the engines that
  // re-planned.
  std::vector<std::string> hosts_with_failed_devices() const;
  int restore_host(const std::string& host);
  // The other hosts (engine_service_hosts.cpp). A host listed without an address is left out of
  // every plan until it joins: join_host checks that the devices its worker reports are the ones
  // this system plans on it (name, kind, device model, FPGA image; InputError naming the device and
  // the field otherwise), records its address and time, and plans on it again (also after it was
  // failed). A join is the worker's heartbeat too: fail_host leaves out a joined host not heard
  // from within the heartbeat timeout, as if its stage had failed.
  const std::shared_ptr<HostDirectory>& host_directory() const { return hosts_; }
  nlohmann::json join_host(const std::string& host, const std::string& address, const nlohmann::json& devices);
  int fail_host(const std::string& host, const std::string& why);
  // Name, address, joined, last heard (seconds ago), NIC, devices, and whether any is failed or drained.
  nlohmann::json hosts() const;
  // The devices this system plans on `host` (NotFound when it is not one of the other hosts): a
  // host drain drains each (AdminApi::drain_host).
  std::vector<std::string> host_devices(const std::string& host) const;

  // Operator changes to devices, applied to every served model's engine (they share the devices),
  // one at a time, by DeviceAdmin: device_admin.h says what each does
  // and how a failed change is rolled back (RolledBack).
  nlohmann::json set_device_drained(const std::string& device, bool drained);     // drain / undrain
  nlohmann::json set_devices_drained(const std::vector<std::string>& devices, bool drained, const std::string& what);
  nlohmann::json load_bitstream(const std::string& device, const std::string& manifest_path);
  nlohmann::json unload_bitstream(const std::string& device);
  // Image choice for `model` at the characteristics and objective of its current plan
  // (DeviceAdmin::choose_images): the proposal, carried out when `apply`.
  nlohmann::json choose_images(const std::string& model, double horizon, bool apply);
  nlohmann::json devices() const;  // kind, planned as, backend, bitstream, drained, energy

  // The status page's figures (engine_service_status.cpp). status(): what may be read while an
  // admin change runs: per model its plan with predicted and measured stage times, the latest
  // re-plans, throughput per plan epoch and what the drift detector watches; each device's busy
  // time. status_devices(): what must wait for one to finish (AdminApi calls it between calls):
  // devices() and, per model, the Pareto front of its current workload with its plan marked.
  static constexpr std::size_t kStatusReplans = 64;  // re-plans per model in status()
  nlohmann::json status() const;
  nlohmann::json status_devices() const;

  // Model management while serving (engine_service_models.cpp; the Open Inference Protocol's
  // model repository extension). Each repository model with its state: READY (and the version
  // served) or UNAVAILABLE (and why, when a load failed).
  nlohmann::json repository_index() const;
  // Loads `name` from the repositories, or reloads it (new weights, new version, or the config
  // text `config_yaml` instead of the folder's): the new version is built and planned beside the
  // serving one, then switched in at once; requests admitted before the switch are answered by
  // the old version, the ones after by the new, none is lost or answered twice. A load that fails
  // leaves the serving version untouched (InputError naming the file, tensor or key).
  nlohmann::json load_model(const std::string& name, const std::optional<std::string>& config_yaml = std::nullopt);
  // Stops admitting requests for `name`, lets those admitted finish, and frees the model.
  nlohmann::json unload_model(const std::string& name);
  // Runs one small synthetic request through every served model and waits for it, so the first
  // client request does not pay for the cold start (kernel JIT, first allocations and page faults).
  // Returns one line per model with the time it took (measured).
  std::vector<std::string> warm_up();
  // One look at the repositories (--model-control-mode poll): a model whose folder changed is
  // reloaded, a new one loaded, one whose folder is gone unloaded; a load that fails is reported and
  // not retried until its folder changes again. Returns what happened, one line per model.
  std::vector<std::string> poll_repository();
  // Saves every served model's refined performance models under options.state_dir (nothing without
  // a state folder or fitted models). One line per model saved; dype::Error when a write fails.
  std::vector<std::string> save_refined() const;
  // What was restored from saved refinements as models were built, one line each (warnings start
  // "warning: ").
  std::vector<std::string> refined_notes() const;

 private:
  struct Served {
    std::string name;
    std::shared_ptr<const Model> model;
    std::int64_t version = 1;
    std::shared_ptr<SchedPlanner> planner;
    std::unique_ptr<Engine> engine;
    Characteristics plan_for;
    std::string mode;  // the objective the engine was built with
    std::string fingerprint;  // its repository folder's when loaded; empty: not from a repository
    std::optional<DynamicBatching> batching;
    std::shared_ptr<EpochObserver> epochs;  // answered requests per plan epoch (the status page)
    std::shared_ptr<IncrementalPricer> pricer;  // GNNs: registered graphs' updates priced both ways
    ModelInfo info() const;
  };
  // A model as served: its planner and engine, planned for m.plan_for in the current mode.
  std::shared_ptr<Served> make_served(const ServedModel& m);
  // The serving entry of `name` (NotFound otherwise); shared so a concurrent unload cannot free it
  // under a caller.
  std::shared_ptr<Served> find(const std::string& name) const;
  // Under served_mu_ held exclusively: engines_ from served_.
  void index_engines_locked();
  // Waits until no caller holds `old`, then drains and frees its engine and model; seconds taken.
  // `unloaded` (no version replaces it): the receive buffers kept for requests go too.
  static double retire(std::shared_ptr<Served> old, bool unloaded = false);
  // One synthetic request through `s`'s engine, waited for; seconds it took.
  static double warm(Served& s);
  // Takes `name` out of service (exclusive lock; device changes no longer reach it); null if absent.
  std::shared_ptr<Served> take(const std::string& name);
  // load_model without the model-control check (the poller loads in mode poll).
  nlohmann::json do_load(const std::string& name, const std::optional<std::string>& config_yaml);

  EngineServiceOptions options_;
  std::unique_ptr<hw::System> system_;
  std::shared_ptr<HostDirectory> hosts_;  // multi-host systems: where the other hosts are
  // Calls `change` on every served model; returns how many said they changed (re-planned).
  int on_every_engine(const std::function<bool(Served&)>& change);
  std::vector<perf::ModelStore> stores_;  // fitted performance models, for every model's planner
  std::vector<DevicePlanning> planning_;  // what each device is planned with (device_planning.h)
  std::shared_ptr<UtilisationObserver> utilisation_;  // on every engine: devices' busy time for /metrics
  std::unique_ptr<RefinedModelsDir> refined_;  // --state-dir with fitted models: refinements kept there
  mutable std::mutex save_mu_;                 // one save_refined at a time; refined_notes_
  std::vector<std::string> refined_notes_;
  mutable std::shared_mutex served_mu_;   // served_ and engines_: shared to serve, exclusive to swap
  std::vector<std::shared_ptr<Served>> served_;
  std::map<std::string, std::string> load_failures_;  // repository model -> why its last load failed
  std::map<std::string, std::string> failed_fingerprints_;  // the folder state a poll failed to load
  mutable std::mutex models_mu_;                       // loads and unloads, one at a time
  mutable std::mutex mode_mu_;
  std::string mode_;
  std::string cost_source_ = "device models";
  std::vector<ServedEngine> engines_;    // served_'s engines by name, for the helpers below
  std::unique_ptr<DeviceAdmin> devices_;  // drain, undrain, bitstreams (device_admin.h)
};

// Admin hooks for AdminApi backed by this service (drain, Pareto, bitstreams, devices, status).
AdminHooks admin_hooks(EngineService& service);

}  // namespace dype::rt::daemon
