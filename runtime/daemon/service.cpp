#include "runtime/daemon/service.h"

namespace dype::rt::daemon {

ModelInfo describe_model(const std::string& name, const Model& model) {
  ModelInfo info;
  info.name = name;
  info.family = to_string(model.family());
  info.model = &model;
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
  info.outputs = {{"y", "FP32", {-1, model.output_cols()}}};
  return info;
}

}  // namespace dype::rt::daemon
