#pragma once
// A model repository entry's config.yaml: the family and sizes the kernel chain is built from,
// how its tensors are named in model.safetensors, and what the model answers. Read strictly like
// every other config: an unknown key, a wrong type or an impossible size is an InputError naming
// the file and the key path.
//
//   family: gcn            # gcn | gin | sage | transformer
//   in_features: 34
//   hidden: 16
//   out_features: 4        # classes; default hidden
//   layers: 2
//   activation: relu       # relu | gelu: between layers, as PyG's BasicGNN; in the transformer's FFN
//   eps: 0.0               # gin: (1 + eps) x_i; a file's convs.{i}.eps must agree
//   train_eps: false       # gin (eps then comes from the file)
//   batch_norm: false      # gin: MLP norms (folded into the first GEMM at load)
//   batch_norm_eps: 1e-5
//   aggr: mean             # sage (mean is the one served)
//   d_model: 64            # transformer (nn.TransformerEncoderLayer, batch_first=True)
//   heads: 4
//   ffn: 128               # dim_feedforward
//   norm_first: false      # pre-norm when true
//   layer_norm_eps: 1e-5
//   window: 16             # the default when a request names none: |i - j| <= window / 2
//   tensor_names: {l0.update.weight: conv1.lin.weight}   # dype slot -> tensor in the file
//   outputs: [logits, predictions]   # default [logits]: "y", and/or "predictions" (arg-max per row)
//   version: 2             # serve this version folder instead of the highest
//
//   rt::ModelConfig c = rt::load_model_config("models/karate-gcn/config.yaml");
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace dype::rt {

// Dynamic batching of a GNN model's small requests (config.yaml `dynamic_batching`, Triton's
// max_batch_size and max_queue_delay_microseconds): up to max_batch_size concurrent requests
// merged into one block-diagonal graph of at most max_nodes nodes, the first waiting at most
// max_queue_delay_us for the others. dype-serve --batch for the same model takes precedence.
struct DynamicBatching {
  int max_batch_size = 0;
  double max_queue_delay_us = 500.0;
  std::int64_t max_nodes = 1 << 16;
  bool operator==(const DynamicBatching&) const = default;
};

struct ModelConfig {
  std::string file;  // where it was read from (messages)
  ModelSpec spec;
  std::string activation = "relu";
  bool train_eps = false;
  bool eps_given = false;  // eps written in the config (checked against the file's)
  bool batch_norm = false;
  double batch_norm_eps = 1e-5;
  std::map<std::string, std::string> tensor_names;  // dype slot -> tensor name in the file
  std::optional<std::int64_t> version;              // pinned version folder
  std::optional<DynamicBatching> dynamic_batching;  // GNN families only
};

ModelConfig load_model_config(const std::string& path);
ModelConfig parse_model_config(const std::string& yaml_text, const std::string& file_name);

}  // namespace dype::rt
