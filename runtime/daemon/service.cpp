#include "runtime/daemon/service.h"

#include "runtime/daemon/errors.h"

namespace dype::rt::daemon {

ModelInfo describe_model(const std::string& name, std::shared_ptr<const Model> shared, std::int64_t version) {
  const Model& model = *shared;
  ModelInfo info;
  info.name = name;
  info.family = to_string(model.family());
  info.model = std::move(shared);
  info.version = version;
  if (model.is_gnn()) {
    info.inputs = {{"x", "FP32", {-1, model.spec().in_features}},
                   {"edge_index", "INT64", {2, -1}},
                   {"edge_weight", "FP32", {-1}},
                   {"indptr", "INT64", {-1}},
                   {"indices", "INT64", {-1}},
                   {"values", "FP32", {-1}}};
  } else {
    info.inputs = {{"x", "FP32", {-1, model.spec().d_model}}, {"window", "INT64", {1}}};
  }
  if (model.spec().output_logits) info.outputs.push_back({"y", "FP32", {-1, model.output_cols()}});
  if (model.spec().output_predictions) info.outputs.push_back({"predictions", "INT64", {-1}});
  return info;
}

void check_version(const std::string& model, const std::string& asked, std::int64_t served) {
  if (asked.empty() || asked == std::to_string(served)) return;
  throw NotFound("model '" + model + "' has no version '" + asked + "' (serving " + std::to_string(served) + ")");
}

}  // namespace dype::rt::daemon
