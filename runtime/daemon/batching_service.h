#pragma once
// Dynamic batching of small graphs: an InferenceService in front of another (EngineService) that
// merges concurrent GNN requests for one model into one block-diagonal graph (Graph::
// block_diagonal, as PyG's DataLoader batches graphs), runs it as one pipeline item and splits
// the node outputs back to each request. Node-level GNN outputs over a block-diagonal graph are
// exactly each part's own, so answers are unchanged; what changes is that the per-item costs
// (hand-offs, launches, pipeline bookkeeping) are paid once per batch. The engine sees the batch's
// characteristics, so the plan is made (and re-made on drift) for batched requests.
//
// A batch is sent when it holds max_size requests or max_nodes nodes, or when its first request
// has waited max_queue_delay_us. Off (max_size <= 1) for every model not configured; transformer
// requests and graphs larger than max_nodes always go straight through.
//
//   BatchingService batched(engine_service, {{"", {.max_size = 32, .max_queue_delay_us = 500}}});
//   HttpServer http(batched, ...);  GrpcServer grpc(batched, ...);
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/daemon/service.h"

namespace dype::rt::daemon {

struct BatchPolicy {
  int max_size = 0;                   // requests in one batch; <= 1: no batching
  double max_queue_delay_us = 500.0;  // how long a batch's first request may wait for others
  std::int64_t max_nodes = 1 << 16;   // nodes in one batch; a larger request goes alone
};

// Model name -> policy; the entry "" applies to every model without its own.
using BatchPolicies = std::map<std::string, BatchPolicy>;

// Parses one --batch value: "[MODEL=]MAX_SIZE[/DELAY_US]" (InputError naming the problem).
std::pair<std::string, BatchPolicy> parse_batch_spec(const std::string& spec);

class BatchingService : public InferenceService {
 public:
  BatchingService(InferenceService& inner, BatchPolicies policies);
  ~BatchingService() override;  // sends what is queued, answers it, stops the threads
  BatchingService(const BatchingService&) = delete;
  BatchingService& operator=(const BatchingService&) = delete;

  std::vector<ModelInfo> models() const override { return inner_.models(); }
  ModelInfo model(const std::string& name) const override { return inner_.model(name); }
  bool model_ready(const std::string& name) const override { return inner_.model_ready(name); }
  // Checks the request at once (InputError as the inner service would); a batched one is answered
  // when its batch is. `version`: the version served when it was queued.
  std::future<HostTensor> infer(const std::string& model, Request request, std::int64_t* version) override;
  // A batched request joins its batch at once (true) and `done` gets its answer when the batch is
  // answered, on the batcher's answering thread; any other request: the inner service's try_infer.
  bool try_infer(const std::string& model, Request& request, std::int64_t* version, InferDone& done) override;
  nlohmann::json plan(const std::string& model) const override { return inner_.plan(model); }
  std::shared_ptr<IncrementalPricer> incremental_pricer(const std::string& model) const override {
    return inner_.incremental_pricer(model);
  }
  void set_mode(const std::string& mode) override { inner_.set_mode(mode); }
  std::string mode() const override { return inner_.mode(); }
  // The inner service's lines plus dype_batches_total and dype_batched_requests_total per model.
  std::string metrics_text() const override;
  // Sends every queued batch, then waits for the inner service to answer everything.
  void drain() override;

  // The --batch policy of `model` (its own, else the one for every model), null when none batches.
  const BatchPolicy* policy_for(const std::string& model) const;
  // What batches `model`'s requests: its own --batch entry, else its config.yaml's
  // dynamic_batching (`config`), else the --batch entry for every model; none when no batching.
  std::optional<BatchPolicy> effective_policy(const std::string& model, const std::optional<DynamicBatching>& config) const;
  // Batches sent and requests answered through them for `model` so far (zeros when none).
  std::pair<std::uint64_t, std::uint64_t> counts(const std::string& model) const;

 private:
  class Batcher;  // one per batched model: its queue, a thread that sends, one that answers
  // The model's batcher for `policy`; a model reloaded with another policy gets a new one, the old
  // one retired (kept, so its counts stay in the metrics' counters, until the service stops).
  std::shared_ptr<Batcher> batcher(const std::string& model, const BatchPolicy& policy);

  InferenceService& inner_;
  BatchPolicies policies_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Batcher>> batchers_;
  std::vector<std::pair<std::string, std::shared_ptr<Batcher>>> retired_;
};

}  // namespace dype::rt::daemon
