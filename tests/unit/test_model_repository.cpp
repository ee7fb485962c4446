// Model repository entries that cannot be served are refused with the folder, file, key or tensor
// named and the problem said: configs read strictly, weights that disagree with the config,
// missing or extra tensors, NaN weights, version folders, and a daemon that still serves the
// good models beside a bad one. (Correctness against PyTorch: tests/integration/test_pytorch_reference.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../test_safetensors_file.h"
#include "../test_temp_dir.h"
#include "common/error.h"
#include "runtime/daemon/engine_service.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/repository_models.h"
#include "runtime/repository/model_config.h"
#include "runtime/repository/model_repository.h"
#include "runtime/repository/model_weights.h"

namespace dype::rt {
namespace {

namespace fs = std::filesystem;
using test::F32Tensor;

#define EXPECT_REFUSED(message, needle) \
  EXPECT_NE(std::string(message).find(needle), std::string::npos) << (message)

std::string config_refusal(const std::string& yaml) {
  try {
    parse_model_config(yaml, "config.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kGcn = "family: gcn\nin_features: 3\nhidden: 4\nout_features: 2\nlayers: 2\n";

// A 2-layer GCN 3 -> 4 -> 2 under PyG's names, every value `v`.
std::vector<F32Tensor> gcn_tensors(float v = 0.5f) {
  return {{"convs.0.lin.weight", {4, 3}, std::vector<float>(12, v)},
          {"convs.0.bias", {4}, std::vector<float>(4, v)},
          {"convs.1.lin.weight", {2, 4}, std::vector<float>(8, v)},
          {"convs.1.bias", {2}, std::vector<float>(2, v)}};
}

// ROOT/name/config.yaml and ROOT/name/[version/]model.safetensors.
fs::path make_model(const fs::path& root, const std::string& name, const std::string& config,
                    const std::vector<F32Tensor>& tensors, const std::string& version = "") {
  const fs::path dir = root / name;
  fs::create_directories(dir / version);
  std::ofstream(dir / "config.yaml") << config;
  if (!tensors.empty()) test::write_safetensors(dir / version / "model.safetensors", tensors);
  return dir;
}

fs::path fresh_root(const std::string& tag) {
  const fs::path root = test::process_temp_dir("dype-repo") / tag;
  fs::remove_all(root);
  fs::create_directories(root);
  return root;
}

std::string load_refusal(const fs::path& root, const std::string& name) {
  try {
    ModelRepository({root.string()}).load(name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ModelConfig, ReadsStrictly) {
  const ModelConfig c = parse_model_config(kGcn + "tensor_names: {l0.update.bias: b0}\nversion: 3\n", "config.yaml");
  EXPECT_EQ(c.spec.family, ModelFamily::gcn);
  EXPECT_EQ(c.spec.out_width(), 2);
  EXPECT_EQ(c.tensor_names.at("l0.update.bias"), "b0");
  EXPECT_EQ(c.version, 3);
  EXPECT_REFUSED(config_refusal(kGcn + "dropout: 0.5\n"), "dropout");
  EXPECT_REFUSED(config_refusal("family: gat\n"), "config.yaml: family: unknown family 'gat'; supported: gcn, gin, sage, transformer");
  EXPECT_REFUSED(config_refusal("family: sage\nin_features: 3\nhidden: 4\nlayers: 2\naggr: max\n"),
                 "aggr: 'max' is not served; supported: mean");
  EXPECT_REFUSED(config_refusal("family: transformer\n"), "config.yaml: d_model: required key missing");
  const std::string tf = "family: transformer\nd_model: 12\nheads: 3\nffn: 20\nlayers: 2\n";
  const ModelConfig t = parse_model_config(tf + "norm_first: true\nactivation: gelu\nwindow: 6\nlayer_norm_eps: 1e-6\n", "config.yaml");
  EXPECT_EQ(t.spec.family, ModelFamily::transformer);
  EXPECT_TRUE(t.spec.residual_norm);
  EXPECT_TRUE(t.spec.norm_first);
  EXPECT_EQ(t.spec.activation, Nonlinearity::gelu);
  EXPECT_EQ(t.spec.window, 6);
  EXPECT_FLOAT_EQ(t.spec.layer_norm_eps, 1e-6f);
  EXPECT_REFUSED(config_refusal("family: transformer\nd_model: 10\nheads: 3\nffn: 20\nlayers: 2\n"),
                 "heads: must divide d_model (10), got 3");
  EXPECT_REFUSED(config_refusal(tf + "in_features: 3\n"), "in_features");  // not a transformer key
  EXPECT_REFUSED(config_refusal(tf + "layer_norm_eps: 0\n"), "layer_norm_eps");
  EXPECT_REFUSED(config_refusal(tf + "window: -2\n"), "window: must be in [0,");
  EXPECT_REFUSED(config_refusal("family: gcn\nhidden: 4\nlayers: 2\n"), "in_features: required key missing");
  EXPECT_REFUSED(config_refusal("family: gcn\nin_features: 0\nhidden: 4\nlayers: 2\n"), "in_features: must be in [1,");
  EXPECT_REFUSED(config_refusal(kGcn + "activation: swish\n"), "activation: 'swish' is not a kernel epilogue; supported: relu, gelu");
  EXPECT_EQ(parse_model_config(kGcn + "activation: gelu\n", "config.yaml").spec.activation, Nonlinearity::gelu);
  EXPECT_REFUSED(config_refusal(kGcn + "eps: 0.1\n"), "eps");  // not a GCN key
  const ModelConfig both = parse_model_config(kGcn + "outputs: [logits, predictions]\n", "config.yaml");
  EXPECT_TRUE(both.spec.output_logits && both.spec.output_predictions);
  const ModelConfig classes = parse_model_config(kGcn + "outputs: predictions\n", "config.yaml");
  EXPECT_TRUE(!classes.spec.output_logits && classes.spec.output_predictions);
  EXPECT_REFUSED(config_refusal(kGcn + "outputs: [logits, probabilities]\n"),
                 "outputs: unknown output 'probabilities'; supported: logits, predictions");
  EXPECT_REFUSED(config_refusal(kGcn + "outputs: []\n"), "outputs: names no output");
  // dynamic_batching: Triton's max_batch_size / max_queue_delay, GNN families only.
  const ModelConfig batched =
      parse_model_config(kGcn + "dynamic_batching: {max_batch_size: 16, max_queue_delay_us: 250}\n", "config.yaml");
  ASSERT_TRUE(batched.dynamic_batching);
  EXPECT_EQ(batched.dynamic_batching->max_batch_size, 16);
  EXPECT_EQ(batched.dynamic_batching->max_queue_delay_us, 250.0);
  EXPECT_EQ(batched.dynamic_batching->max_nodes, 1 << 16);
  EXPECT_FALSE(parse_model_config(kGcn, "config.yaml").dynamic_batching);
  EXPECT_REFUSED(config_refusal(kGcn + "dynamic_batching: {max_queue_delay_us: 250}\n"),
                 "dynamic_batching.max_batch_size: required key missing");
  EXPECT_REFUSED(config_refusal(kGcn + "dynamic_batching: {max_batch_size: 0}\n"), "dynamic_batching.max_batch_size: must be in [1,");
  EXPECT_REFUSED(config_refusal(kGcn + "dynamic_batching: {max_batch_size: 8, max_queue_delay_us: -1}\n"),
                 "max_queue_delay_us: must be 0 to 10000000 microseconds");
  EXPECT_REFUSED(config_refusal(kGcn + "dynamic_batching: {max_batch_size: 8, preferred: 4}\n"), "preferred");
  EXPECT_REFUSED(config_refusal("family: transformer\nd_model: 8\nheads: 2\nffn: 16\nlayers: 1\n"
                                "dynamic_batching: {max_batch_size: 8}\n"),
                 "dynamic_batching: is for GNN models");
  EXPECT_REFUSED(config_refusal("family: gin\nin_features: 3\nhidden: 4\nlayers: 2\neps: -1\n"), "eps: must be finite and > -1");
  EXPECT_REFUSED(config_refusal(kGcn + "tensor_names: [a]\n"), "tensor_names: must be a mapping");
  EXPECT_REFUSED(config_refusal("family: gcn\nin_features: [\n"), "config.yaml:");
}

// A 1-layer encoder, d_model 4, 2 heads, ffn 6, under nn.TransformerEncoder's names; in_proj's
// row r holds r + 1 everywhere so the Q/K/V split can be seen.
std::vector<F32Tensor> encoder_tensors() {
  std::vector<float> in_proj;
  for (int r = 0; r < 12; ++r)
    for (int c = 0; c < 4; ++c) in_proj.push_back(static_cast<float>(r + 1));
  std::vector<float> in_bias;
  for (int r = 0; r < 12; ++r) in_bias.push_back(static_cast<float>(r));
  return {{"layers.0.self_attn.in_proj_weight", {12, 4}, in_proj},
          {"layers.0.self_attn.in_proj_bias", {12}, in_bias},
          {"layers.0.self_attn.out_proj.weight", {4, 4}, std::vector<float>(16, 0.1f)},
          {"layers.0.self_attn.out_proj.bias", {4}, std::vector<float>(4, 0.0f)},
          {"layers.0.linear1.weight", {6, 4}, std::vector<float>(24, 0.1f)},
          {"layers.0.linear1.bias", {6}, std::vector<float>(6, 0.0f)},
          {"layers.0.linear2.weight", {4, 6}, std::vector<float>(24, 0.1f)},
          {"layers.0.linear2.bias", {4}, std::vector<float>(4, 0.0f)},
          {"layers.0.norm1.weight", {4}, std::vector<float>(4, 1.0f)},
          {"layers.0.norm1.bias", {4}, std::vector<float>(4, 0.0f)},
          {"layers.0.norm2.weight", {4}, std::vector<float>(4, 1.0f)},
          {"layers.0.norm2.bias", {4}, std::vector<float>(4, 0.0f)}};
}

TEST(ModelWeights, EncoderTensorsFillTheChainAndAreChecked) {
  const std::string cfg = "family: transformer\nd_model: 4\nheads: 2\nffn: 6\nlayers: 1\n";
  const fs::path root = fresh_root("encoder");
  make_model(root, "ok", cfg, encoder_tensors());
  const RepositoryModel m = ModelRepository({root.string()}).load("ok");
  const Model& model = *m.model;
  ASSERT_EQ(model.num_kernels(), 7);
  const Step& qkv = model.step(0);
  ASSERT_TRUE(qkv.qkv);
  // W_q is in_proj rows 0-3 transposed: column o of the [in x out] weight holds o + 1; W_k rows 4-7.
  EXPECT_FLOAT_EQ(model.weight(qkv.weights[0]).data[1], 2.0f);
  EXPECT_FLOAT_EQ(model.weight(qkv.weights[2]).data[1], 6.0f);
  EXPECT_FLOAT_EQ(model.weight(qkv.weights[5]).data[3], 11.0f);  // b_v = in_proj_bias[8..11]
  EXPECT_EQ(model.step(3).op, kernels::OpKind::layer_norm);
  EXPECT_EQ(model.step(3).name, "l0.norm1");

  std::vector<F32Tensor> missing = encoder_tensors();
  missing.pop_back();
  make_model(root, "missing", cfg, missing);
  EXPECT_REFUSED(load_refusal(root, "missing"), "tensor 'layers.0.norm2.bias': missing (weight slot l0.norm2.bias");
  std::vector<F32Tensor> misshapen = encoder_tensors();
  misshapen[0] = {"layers.0.self_attn.in_proj_weight", {12, 3}, std::vector<float>(36, 1.0f)};
  make_model(root, "misshapen", cfg, misshapen);
  EXPECT_REFUSED(load_refusal(root, "misshapen"), "tensor 'layers.0.self_attn.in_proj_weight'");
  std::vector<F32Tensor> extra = encoder_tensors();
  extra.push_back({"layers.1.norm1.weight", {4}, std::vector<float>(4, 1.0f)});
  make_model(root, "extra", cfg, extra);
  EXPECT_REFUSED(load_refusal(root, "extra"), "tensor 'layers.1.norm1.weight': is not used by a 1-layer transformer");
}

TEST(ModelWeights, RefusesWeightsThatAreNotTheConfigsModel) {
  const fs::path root = fresh_root("weights");
  make_model(root, "ok", kGcn, gcn_tensors());
  const RepositoryModel m = ModelRepository({root.string()}).load("ok");
  EXPECT_EQ(m.model->weight(m.model->step(1).weights[0]).rows, 3);  // [out, in] transposed to [in, out]
  EXPECT_EQ(m.model->weight(m.model->step(1).weights[0]).cols, 4);

  auto missing = gcn_tensors();
  missing.pop_back();
  make_model(root, "missing", kGcn, missing);
  EXPECT_REFUSED(load_refusal(root, "missing"), "tensor 'convs.1.bias': missing (weight slot l1.update.bias");

  auto extra = gcn_tensors();
  extra.push_back({"convs.2.lin.weight", {2, 2}, {1, 2, 3, 4}});
  make_model(root, "extra", kGcn, extra);
  EXPECT_REFUSED(load_refusal(root, "extra"), "tensor 'convs.2.lin.weight': is not used by a 2-layer gcn");

  // The config says 5 input features, the weights were trained on 3.
  make_model(root, "wide", "family: gcn\nin_features: 5\nhidden: 4\nout_features: 2\nlayers: 2\n", gcn_tensors());
  EXPECT_REFUSED(load_refusal(root, "wide"), "tensor 'convs.0.lin.weight': shape [4, 3], expected [4, 5]");

  auto nan = gcn_tensors();
  nan[2].values[5] = std::nanf("");
  make_model(root, "nan", kGcn, nan);
  EXPECT_REFUSED(load_refusal(root, "nan"), "tensor 'convs.1.lin.weight': NaN at flat index 5");

  // tensor_names maps a slot to the file's own name; an unknown slot is refused listing the slots.
  auto renamed = gcn_tensors();
  renamed[1].name = "first.bias";
  make_model(root, "renamed", kGcn + "tensor_names: {l0.update.bias: first.bias}\n", renamed);
  EXPECT_NO_THROW(ModelRepository({root.string()}).load("renamed"));
  make_model(root, "badslot", kGcn + "tensor_names: {l0.bias: first.bias}\n", renamed);
  EXPECT_REFUSED(load_refusal(root, "badslot"), "tensor_names.l0.bias: not a weight slot of this model; its slots: l0.update.weight");
}

TEST(ModelWeights, GinEpsMustBeOneAndAgreeWithTheConfig) {
  const fs::path root = fresh_root("gin");
  const std::string gin = "family: gin\nin_features: 2\nhidden: 2\nlayers: 2\n";
  auto tensors = [](float eps0, float eps1) {
    std::vector<F32Tensor> t;
    for (int l = 0; l < 2; ++l) {
      const std::string c = "convs." + std::to_string(l) + ".";
      t.push_back({c + "nn.lins.0.weight", {2, 2}, {1, 0, 0, 1}});
      t.push_back({c + "nn.lins.0.bias", {2}, {0, 0}});
      t.push_back({c + "nn.lins.1.weight", {2, 2}, {1, 0, 0, 1}});
      t.push_back({c + "nn.lins.1.bias", {2}, {0, 0}});
      t.push_back({c + "eps", {1}, {l == 0 ? eps0 : eps1}});
    }
    return t;
  };
  make_model(root, "same", gin, tensors(0.25f, 0.25f));
  EXPECT_FLOAT_EQ(ModelRepository({root.string()}).load("same").model->spec().gin_eps, 0.25f);
  make_model(root, "differ", gin, tensors(0.25f, 0.5f));
  EXPECT_REFUSED(load_refusal(root, "differ"), "tensor 'convs.1.eps': eps 0.500000 differs from 'convs.0.eps'");
  make_model(root, "disagree", gin + "eps: 0.1\n", tensors(0.25f, 0.25f));
  EXPECT_REFUSED(load_refusal(root, "disagree"), "eps: config says 0.100000, the weights' 'convs.0.eps' holds 0.250000");
}

TEST(ModelRepository, FoldersAndVersions) {
  const fs::path root = fresh_root("versions");
  make_model(root, "v", kGcn, gcn_tensors(0.1f), "1");
  make_model(root, "v", kGcn, gcn_tensors(0.2f), "3");
  const RepositoryModel highest = ModelRepository({root.string()}).load("v");
  EXPECT_EQ(highest.version, 3);
  EXPECT_FLOAT_EQ(highest.model->weight(1).data[0], 0.2f);
  make_model(root, "pinned", kGcn + "version: 1\n", gcn_tensors(0.1f), "1");
  make_model(root, "pinned", kGcn + "version: 1\n", gcn_tensors(0.2f), "2");
  EXPECT_EQ(ModelRepository({root.string()}).load("pinned").version, 1);
  make_model(root, "pinless", kGcn + "version: 9\n", gcn_tensors(), "1");
  EXPECT_REFUSED(load_refusal(root, "pinless"), "version: pins 9, no such folder");
  make_model(root, "word", kGcn, gcn_tensors(), "latest");
  EXPECT_REFUSED(load_refusal(root, "word"), "version folder 'latest' is not a number");
  make_model(root, "empty", kGcn, {});
  EXPECT_REFUSED(load_refusal(root, "empty"), "has no weights (model.safetensors or <version>/model.safetensors)");
  make_model(root, "both", kGcn, gcn_tensors());
  make_model(root, "both", kGcn, gcn_tensors(), "2");
  EXPECT_REFUSED(load_refusal(root, "both"), "has both model.safetensors and version folders");
  EXPECT_REFUSED(load_refusal(root, "nothere"), "model 'nothere': not in the model repository");
  fs::create_directories(root / "bad name");
  std::ofstream(root / "bad name" / "config.yaml") << kGcn;
  EXPECT_THROW(ModelRepository({root.string()}), InputError);
  fs::remove_all(root / "bad name");
  EXPECT_THROW(ModelRepository({(root / "v" / "config.yaml").string()}), InputError);  // not a folder
  const fs::path other = fresh_root("other");
  make_model(other, "v", kGcn, gcn_tensors());
  try {
    ModelRepository({root.string(), other.string()});
    ADD_FAILURE() << "a model in two roots was accepted";
  } catch (const InputError& e) {
    EXPECT_REFUSED(e.what(), "model 'v' is in both");
  }
}

TEST(ModelRepository, DaemonServesTheGoodModelsBesideABadOne) {
  const fs::path root = fresh_root("daemon");
  make_model(root, "good", kGcn, gcn_tensors());
  auto bad = gcn_tensors();
  bad[0].shape = {3, 4};
  make_model(root, "bad", kGcn, bad);
  const daemon::RepositoryLoad loaded = daemon::repository_models({root.string()});
  ASSERT_EQ(loaded.models.size(), 1u);
  EXPECT_EQ(loaded.models[0].name, "good");
  EXPECT_EQ(loaded.models[0].plan_for.feature_len, 3);
  ASSERT_EQ(loaded.failures.size(), 1u);
  EXPECT_REFUSED(loaded.failures[0], "model 'bad' not served:");
  EXPECT_REFUSED(loaded.failures[0], "tensor 'convs.0.lin.weight': shape [3, 4], expected [4, 3]");
}

// On a box whose only schedulable devices are FPGAs with an SpMM + GEMM image, a GCN serves and an
// encoder (LayerNorm, window attention) cannot: the daemon starts, serves the GCN, and says which
// kernel of the encoder has no device and why; the repository index shows it.
TEST(ModelRepository, DaemonServesTheModelsItCanPlanAndNamesTheKernelOfOneItCannot) {
  const fs::path root = fresh_root("unplannable");
  const std::string configs = std::string(DYPE_SOURCE_DIR) + "/configs";
  const fs::path system = root / "fpgas.yaml";
  std::ofstream(system) << "system: {name: fpgas-only}\ntopology: {sockets: 1}\ntiming_only: true\ndevices:\n"
                        << "  - {name: cpu0, backend: cpu, model: " << configs << "/devices/generic-cpu.yaml, socket: 0, schedulable: false, threads: 0}\n"
                        << "  - {name: fpga0, backend: emu, model: " << configs << "/devices/xilinx-u280.yaml, socket: 0, bitstream: "
                        << configs << "/bitstreams/u280-sextans-gemm.yaml, link: {type: pcie, generation: 4, lanes: 8}}\n";
  daemon::EngineServiceOptions o;
  o.system_config = system.string();
  ModelSpec gcn;
  gcn.in_features = 8;
  gcn.hidden = 4;
  ModelSpec encoder;
  encoder.family = ModelFamily::transformer;
  encoder.layers = 1;
  encoder.d_model = 16;
  encoder.heads = 2;
  encoder.ffn = 32;
  encoder.residual_norm = true;
  o.models = {{"gcn", gcn, {.nodes = 100, .nnz = 400, .feature_len = 8}},
              {"encoder", encoder, {.feature_len = 16, .seq_len = 64, .window = 8}}};
  daemon::EngineService service(o);
  ASSERT_EQ(service.models().size(), 1u);
  EXPECT_EQ(service.models()[0].name, "gcn");
  EXPECT_THROW(service.model("encoder"), daemon::NotFound);
  try {
    daemon::EngineServiceOptions none = o;
    none.models = {o.models[1]};
    daemon::EngineService nothing(none);
    FAIL() << "a daemon with nothing to serve started";
  } catch (const Error& e) {
    EXPECT_REFUSED(e.what(), "no model can be served: model 'encoder': kernel 'l0.attention' (window_attention) has no "
                               "device to run on (cpu0: not schedulable; fpga0: bitstream 'u280-sextans-gemm' has no "
                               "window_attention)");
  }
}

}  // namespace
}  // namespace dype::rt
