#pragma once
// EngineService: InferenceService on the real runtime. One rt::Engine per served model, all on one
// hw::System (a config file, or what the host has), each planned by the DyPe scheduler
// (rt::SchedPlanner) for the configured objective, re-planning on drift.
//
//   EngineService svc({.system_config = "configs/systems/paper-testbed-pcie4.yaml", .mode = "balanced"});
//   auto y = svc.infer("gcn", request).get();
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hw/system.h"
#include "runtime/daemon/service.h"
#include "runtime/engine.h"
#include "runtime/planner.h"

namespace dype::rt::daemon {

struct ServedModel {
  std::string name;      // the protocol's model name
  ModelSpec spec;
  Characteristics plan_for;  // what the first plan is made for, until requests say otherwise
};

struct EngineServiceOptions {
  std::string system_config;  // empty: detect the host
  std::string mode = "perf";
  std::vector<ServedModel> models;  // empty: default_models()
  EngineOptions engine;
};

// gcn, gin (in_features 64, hidden 128) and swin-transformer (d_model 256, 4 heads) with first
// plans for mid-size inputs.
std::vector<ServedModel> default_models();

class EngineService final : public InferenceService {
 public:
  explicit EngineService(EngineServiceOptions options);
  ~EngineService() override;

  std::vector<ModelInfo> models() const override;
  ModelInfo model(const std::string& name) const override;
  bool model_ready(const std::string& name) const override;
  std::future<HostTensor> infer(const std::string& model, Request request) override;
  nlohmann::json plan(const std::string& model) const override;
  void set_mode(const std::string& mode) override;
  std::string mode() const override;
  std::string metrics_text() const override;
  void drain() override;

  // Pareto front (throughput, energy, devices; modelled) of a model for the characteristics its
  // first plan was made for, or `c` when given.
  nlohmann::json pareto(const std::string& model, std::optional<Characteristics> c = std::nullopt) const;

  const hw::System& system() const { return *system_; }
  Engine& engine(const std::string& model);

 private:
  struct Served {
    std::string name;
    std::unique_ptr<Model> model;
    std::shared_ptr<SchedPlanner> planner;
    std::unique_ptr<Engine> engine;
    Characteristics plan_for;
  };
  Served& find(const std::string& name) const;

  EngineServiceOptions options_;
  std::unique_ptr<hw::System> system_;
  std::vector<std::unique_ptr<Served>> served_;
  mutable std::mutex mode_mu_;
  std::string mode_;
};

}  // namespace dype::rt::daemon
