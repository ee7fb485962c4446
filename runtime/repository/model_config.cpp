#include "runtime/repository/model_config.h"

#include <cmath>
#include <limits>

#include "hw/config_node.h"
#include "common/error.h"

namespace dype::rt {

namespace {

// A whole number in [lo, hi] at `key`.
std::int64_t sized(const hw::ConfigNode& n, std::string_view key, std::int64_t lo, std::int64_t hi) {
  const hw::ConfigNode c = n.child(key);
  const std::int64_t v = c.as_int();
  if (v < lo || v > hi) c.fail("must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return v;
}

constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;  // features per row
constexpr std::int64_t kMaxLayers = 1024;

ModelConfig from_node(const hw::ConfigNode& root) {
  root.expect_map();
  ModelConfig c;
  c.file = root.file();
  const std::string family = root.get_string("family");
  if (family == "gcn") {
    c.spec.family = ModelFamily::gcn;
    root.expect_keys({"family", "in_features", "hidden", "out_features", "layers", "activation", "tensor_names",
                      "version", "outputs", "dynamic_batching"});
  } else if (family == "gin") {
    c.spec.family = ModelFamily::gin;
    root.expect_keys({"family", "in_features", "hidden", "out_features", "layers", "activation", "eps", "train_eps",
                      "batch_norm", "batch_norm_eps", "tensor_names", "version", "outputs", "dynamic_batching"});
  } else if (family == "sage") {
    c.spec.family = ModelFamily::sage;
    root.expect_keys({"family", "in_features", "hidden", "out_features", "layers", "activation", "aggr",
                      "tensor_names", "version", "outputs", "dynamic_batching"});
    const std::string aggr = root.get_string("aggr", "mean");
    if (aggr != "mean") root.child("aggr").fail("'" + aggr + "' is not served; supported: mean");
  } else if (family == "transformer") {
    c.spec.family = ModelFamily::transformer;
    root.expect_keys({"family", "d_model", "heads", "ffn", "layers", "window", "norm_first", "activation",
                      "layer_norm_eps", "tensor_names", "version", "outputs", "dynamic_batching"});
  } else {
    root.child("family").fail("unknown family '" + family + "'; supported: gcn, gin, sage, transformer");
  }
  if (c.spec.family == ModelFamily::transformer) {
    // nn.TransformerEncoderLayer(batch_first=True): skip connections and LayerNorm always.
    c.spec.residual_norm = true;
    c.spec.d_model = sized(root, "d_model", 1, kMaxWidth);
    c.spec.heads = sized(root, "heads", 1, kMaxWidth);
    if (c.spec.d_model % c.spec.heads != 0) {
      root.child("heads").fail("must divide d_model (" + std::to_string(c.spec.d_model) + "), got " +
                               std::to_string(c.spec.heads));
    }
    c.spec.ffn = sized(root, "ffn", 1, kMaxWidth);
    c.spec.norm_first = root.get_bool("norm_first", false);
    const double eps = root.get_positive("layer_norm_eps", 1e-5);
    c.spec.layer_norm_eps = static_cast<float>(eps);
    if (root.has("window")) c.spec.window = sized(root, "window", 0, std::numeric_limits<std::int32_t>::max());
  } else {
    c.spec.in_features = sized(root, "in_features", 1, kMaxWidth);
    c.spec.hidden = sized(root, "hidden", 1, kMaxWidth);
    c.spec.out_features = root.has("out_features") ? sized(root, "out_features", 1, kMaxWidth) : 0;
  }
  c.spec.layers = static_cast<int>(sized(root, "layers", 1, kMaxLayers));
  c.activation = root.get_string("activation", "relu");
  if (c.activation == "relu") {
    c.spec.activation = Nonlinearity::relu;
  } else if (c.activation == "gelu") {
    c.spec.activation = Nonlinearity::gelu;
  } else {
    root.child("activation").fail("'" + c.activation + "' is not a kernel epilogue; supported: relu, gelu");
  }
  if (c.spec.family == ModelFamily::gin) {
    if (root.has("eps")) {
      const double eps = root.get_double("eps");
      if (!std::isfinite(eps) || eps <= -1.0) root.child("eps").fail("must be finite and > -1");
      c.spec.gin_eps = static_cast<float>(eps);
      c.eps_given = true;
    }
    c.train_eps = root.get_bool("train_eps", false);
    c.batch_norm = root.get_bool("batch_norm", false);
    c.batch_norm_eps = root.get_positive("batch_norm_eps", 1e-5);
  }
  if (auto names = root.optional_child("tensor_names")) {
    names->expect_map();
    for (const auto& kv : names->yaml()) {
      if (!kv.first.IsScalar()) names->fail("keys must be dype weight slots such as l0.update.weight");
      const std::string slot = kv.first.as<std::string>();
      const hw::ConfigNode v = names->child(slot);
      const std::string tensor = v.as_string();
      if (tensor.empty()) v.fail("must name a tensor");
      c.tensor_names[slot] = tensor;
    }
  }
  if (auto outputs = root.optional_child("outputs")) {
    // A name or a list of names: logits (the output "y") and predictions (arg-max class per row).
    std::vector<std::string> names;
    if (outputs->is_sequence()) {
      for (std::size_t i = 0; i < outputs->size(); ++i) names.push_back(outputs->at(i).as_string());
    } else {
      names.push_back(outputs->as_string());
    }
    c.spec.output_logits = c.spec.output_predictions = false;
    for (const std::string& n : names) {
      if (n == "logits") c.spec.output_logits = true;
      else if (n == "predictions") c.spec.output_predictions = true;
      else outputs->fail("unknown output '" + n + "'; supported: logits, predictions");
    }
    if (names.empty()) outputs->fail("names no output; supported: logits, predictions");
  }
  if (root.has("version")) c.version = sized(root, "version", 0, std::numeric_limits<std::int32_t>::max());
  if (auto b = root.optional_child("dynamic_batching")) {
    if (family == "transformer") b->fail("is for GNN models (graphs merged block-diagonally); not for transformers");
    b->expect_keys({"max_batch_size", "max_queue_delay_us", "max_nodes"});
    DynamicBatching d;
    d.max_batch_size = static_cast<int>(sized(*b, "max_batch_size", 1, 4096));
    if (b->has("max_queue_delay_us")) {
      d.max_queue_delay_us = b->get_double("max_queue_delay_us");
      if (!(d.max_queue_delay_us >= 0 && d.max_queue_delay_us <= 1e7))
        b->child("max_queue_delay_us").fail("must be 0 to 10000000 microseconds");
    }
    if (b->has("max_nodes")) d.max_nodes = sized(*b, "max_nodes", 1, std::int64_t{1} << 30);
    c.dynamic_batching = d;
  }
  return c;
}

}  // namespace

ModelConfig parse_model_config(const std::string& yaml_text, const std::string& file_name) {
  return from_node(hw::ConfigNode::parse(yaml_text, file_name));
}

ModelConfig load_model_config(const std::string& path) { return from_node(hw::ConfigNode::load_file(path)); }

}  // namespace dype::rt
