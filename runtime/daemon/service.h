#pragma once
// InferenceService: the narrow interface the protocol front ends (HTTP, gRPC) serve. It hides how
// requests run (EngineService: one rt::Engine per model). Front ends only parse, validate, admit
// and encode; everything about plans and devices comes through here.
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model.h"
#include "runtime/planning/incremental_pricing.h"
#include "runtime/repository/model_config.h"

namespace dype::rt::daemon {

struct TensorSpec {
  std::string name;
  std::string datatype;
  std::vector<std::int64_t> shape;  // -1: any size
};

struct ModelInfo {
  std::string name;
  std::string family;               // gcn | gin | transformer
  std::shared_ptr<const Model> model;  // the model requests are checked against (kept alive)
  std::int64_t version = 1;         // the version served (a model repository's version folder)
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::optional<DynamicBatching> batching;  // its config.yaml's dynamic_batching, when it has one
};

class InferenceService {
 public:
  virtual ~InferenceService() = default;
  virtual std::vector<ModelInfo> models() const = 0;
  // NotFound when no such model.
  virtual ModelInfo model(const std::string& name) const = 0;
  virtual bool model_ready(const std::string& name) const = 0;
  // InputError when the request does not fit the model; the future carries run-time failures.
  // `version`, when given, gets the version of the model that takes the request (a reload may
  // switch versions between requests; each is answered by the one that admitted it).
  virtual std::future<HostTensor> infer(const std::string& model, Request request, std::int64_t* version) = 0;
  // The answer of a request try_infer() took: the output, or the error (run-time failures).
  using InferDone = std::function<void(HostTensor y, std::exception_ptr error)>;
  // infer() for a front end that must not wait (an HTTP I/O thread): true when the request was
  // taken without waiting, and `done` then gets its answer once, on an engine thread (it must not
  // block, submit or throw); false when taking it would wait (the engine full, a re-plan holding
  // submissions) or the service answers only through futures (this default), `request` untouched:
  // call infer() from a thread that may wait. Throws what infer() throws before queueing.
  virtual bool try_infer(const std::string& /*model*/, Request& /*request*/, std::int64_t* /*version*/,
                         InferDone& /*done*/) {
    return false;
  }
  // The current plan of a model: epoch, label, stages, re-plan records (JSON for the admin API).
  virtual nlohmann::json plan(const std::string& model) const = 0;
  // Prices a registered graph's updates for `model` both ways, kept activations or the engine's
  // pipeline (runtime/planning/incremental_pricing.h); null when the service does not plan.
  virtual std::shared_ptr<IncrementalPricer> incremental_pricer(const std::string& /*model*/) const { return nullptr; }
  // Changes the objective of every model (perf | energy | balanced | qos); re-plans at once.
  virtual void set_mode(const std::string& mode) = 0;
  virtual std::string mode() const = 0;
  // Prometheus text lines for what the runtime exposes (epochs, swaps, stage busy, queue depth).
  virtual std::string metrics_text() const = 0;
  // Waits until every submitted request has been answered.
  virtual void drain() = 0;
};

// Model metadata as the protocol publishes it (inputs x / edge_index / indptr / indices / ...).
ModelInfo describe_model(const std::string& name, std::shared_ptr<const Model> model, std::int64_t version = 1);

// A request naming a version (URL /versions/{v}, gRPC model_version) must name the one served:
// NotFound "model 'm' has no version 'v' (serving 2)" otherwise. An empty `asked` names none.
void check_version(const std::string& model, const std::string& asked, std::int64_t served);

}  // namespace dype::rt::daemon
