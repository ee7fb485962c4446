#include "runtime/repository/model_weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "common/error.h"

namespace dype::rt {

namespace {

const char* kBatchNorm[] = {"weight", "bias", "running_mean", "running_var"};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// slot -> default (PyG) tensor name, in chain order.
std::vector<std::pair<std::string, std::string>> default_names(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < c.spec.layers; ++i) {
    const std::string l = "l" + std::to_string(i) + ".";
    const std::string conv = "convs." + std::to_string(i) + ".";
    if (c.spec.family == ModelFamily::transformer) {
      const std::string t = "layers." + std::to_string(i) + ".";
      out.push_back({l + "qkv.weight", t + "self_attn.in_proj_weight"});
      out.push_back({l + "qkv.bias", t + "self_attn.in_proj_bias"});
      out.push_back({l + "out_proj.weight", t + "self_attn.out_proj.weight"});
      out.push_back({l + "out_proj.bias", t + "self_attn.out_proj.bias"});
      out.push_back({l + "ffn1.weight", t + "linear1.weight"});
      out.push_back({l + "ffn1.bias", t + "linear1.bias"});
      out.push_back({l + "ffn2.weight", t + "linear2.weight"});
      out.push_back({l + "ffn2.bias", t + "linear2.bias"});
      for (const char* n : {"norm1", "norm2"}) {
        out.push_back({l + n + ".weight", t + n + ".weight"});
        out.push_back({l + n + ".bias", t + n + ".bias"});
      }
      continue;
    }
    if (c.spec.family == ModelFamily::gcn) {
      out.push_back({l + "update.weight", conv + "lin.weight"});
      out.push_back({l + "update.bias", conv + "bias"});
      continue;
    }
    if (c.spec.family == ModelFamily::sage) {
      out.push_back({l + "update.weight_l", conv + "lin_l.weight"});
      out.push_back({l + "update.weight_r", conv + "lin_r.weight"});
      out.push_back({l + "update.bias", conv + "lin_l.bias"});
      continue;
    }
    out.push_back({l + "mlp1.weight", conv + "nn.lins.0.weight"});
    out.push_back({l + "mlp1.bias", conv + "nn.lins.0.bias"});
    if (c.batch_norm) {
      for (const char* p : kBatchNorm) out.push_back({l + "mlp1.norm." + p, conv + "nn.norms.0." + p});
    }
    out.push_back({l + "mlp2.weight", conv + "nn.lins.1.weight"});
    out.push_back({l + "mlp2.bias", conv + "nn.lins.1.bias"});
    out.push_back({l + "eps", conv + "eps"});
  }
  return out;
}

std::string file_and(const SafetensorsFile& f, const std::string& tensor) {
  return f.path() + ": tensor '" + tensor + "'";
}

// [out, in] as PyTorch's Linear stores it, transposed to the [in, out] the GEMM reads.
HostTensor linear_weight(const SafetensorsFile& f, const std::string& name, std::int64_t in, std::int64_t out) {
  return make_tensor(in, out, f.to_f32_transposed(name, out, in));
}

HostTensor vector_of(const SafetensorsFile& f, const std::string& name, std::int64_t n) {
  return make_tensor(1, n, f.to_f32(name, std::vector<std::int64_t>{n}));
}

// The one (1 + eps) of a GIN: dype's graph carries it on the diagonal, so every layer must agree.
float gin_eps(const ModelConfig& c, const SafetensorsFile& f, const std::map<std::string, std::string>& names) {
  std::optional<float> eps;
  std::string first;
  for (int i = 0; i < c.spec.layers; ++i) {
    const std::string& name = names.at("l" + std::to_string(i) + ".eps");
    if (!f.contains(name)) {
      if (c.train_eps) throw InputError(file_and(f, name), "missing (train_eps: true takes eps from the file)");
      continue;
    }
    const TensorView& v = f.tensor(name);
    if (v.elements() != 1) throw InputError(file_and(f, name), "must hold one value, has " + std::to_string(v.elements()));
    const float e = f.to_f32(name)[0];
    if (e <= -1.0f) throw InputError(file_and(f, name), "eps " + std::to_string(e) + " must be > -1");
    if (eps && *eps != e) {
      throw InputError(file_and(f, name), "eps " + std::to_string(e) + " differs from " + first + "'s " +
                                              std::to_string(*eps) + "; dype's GIN graph carries one (1 + eps) for all layers");
    }
    if (!eps) first = "'" + name + "'";
    eps = e;
  }
  if (!eps) return c.spec.gin_eps;
  if (c.eps_given && std::fabs(*eps - c.spec.gin_eps) > 1e-7f) {
    throw InputError(c.file + ": eps", "config says " + std::to_string(c.spec.gin_eps) + ", the weights' " + first +
                                           " holds " + std::to_string(*eps));
  }
  return *eps;
}

}  // namespace

std::vector<WeightSlot> weight_slots(const ModelConfig& c) {
  std::vector<WeightSlot> slots;
  std::set<std::string> known;
  for (const auto& [slot, tensor] : default_names(c)) {
    const auto mapped = c.tensor_names.find(slot);
    WeightSlot w{slot, mapped == c.tensor_names.end() ? tensor : mapped->second, !ends_with(slot, ".eps"), ""};
    const std::size_t norm = tensor.find(".norms.0.");
    if (mapped == c.tensor_names.end() && norm != std::string::npos) {
      w.alternate = tensor.substr(0, norm) + ".norms.0.module." + tensor.substr(norm + 9);
    }
    slots.push_back(w);
    known.insert(slot);
  }
  for (const auto& [slot, tensor] : c.tensor_names) {
    if (!known.count(slot)) {
      std::string list;
      for (const auto& s : slots) list += (list.empty() ? "" : ", ") + s.slot;
      throw InputError(c.file + ": tensor_names." + slot, "not a weight slot of this model; its slots: " + list);
    }
  }
  return slots;
}

Model load_model_weights(const ModelConfig& config, const SafetensorsFile& f) {
  std::vector<WeightSlot> slots = weight_slots(config);
  for (WeightSlot& s : slots) {
    if (!f.contains(s.tensor) && !s.alternate.empty() && f.contains(s.alternate)) s.tensor = s.alternate;
  }
  std::map<std::string, std::string> names;
  for (const WeightSlot& s : slots) names[s.slot] = s.tensor;
  // Every tensor of the file fills a slot: a stray one means the file is not the model the config says.
  std::set<std::string> used;
  for (const WeightSlot& s : slots) used.insert(s.tensor);
  for (const std::string& t : f.names()) {
    if (!used.count(t) && !ends_with(t, ".num_batches_tracked")) {
      throw InputError(file_and(f, t), std::string("is not used by a ") + std::to_string(config.spec.layers) + "-layer " +
                                           to_string(config.spec.family) + (config.batch_norm ? " with batch norm" : "") +
                                           " (map it with tensor_names in " + config.file + ", or remove it)");
    }
  }
  for (const WeightSlot& s : slots) {
    if (s.required && !f.contains(s.tensor)) {
      throw InputError(file_and(f, s.tensor), "missing (weight slot " + s.slot + " of " + config.file + ")");
    }
  }
  ModelSpec spec = config.spec;
  spec.materialize_weights = false;  // every weight comes from the file
  if (spec.family == ModelFamily::gin) spec.gin_eps = gin_eps(config, f, names);
  Model m = Model::make(spec);
  for (const Step& step : m.steps()) {
    if (step.weights.empty()) continue;
    const std::string& bname = names.at(step.name + ".bias");
    if (step.op == kernels::OpKind::layer_norm) {
      const std::string& gname = names.at(step.name + ".weight");
      m.set_weight(step.weights[0], vector_of(f, gname, step.out_cols), file_and(f, gname));
      m.set_weight(step.weights[1], vector_of(f, bname, step.out_cols), file_and(f, bname));
      continue;
    }
    if (step.qkv) {
      // nn.MultiheadAttention's packed in_proj: [3d, d] = [W_q; W_k; W_v] ([out, in] each) and
      // [3d] = [b_q; b_k; b_v]; dype's QKV step holds three [d, d] (in x out) weights and biases.
      const std::int64_t d = step.out_cols;
      const std::string& wname = names.at(step.name + ".weight");
      const HostTensor w = linear_weight(f, wname, d, 3 * d);  // [d x 3d]: Q, K, V column blocks
      const HostTensor b = vector_of(f, bname, 3 * d);
      for (int o = 0; o < 3; ++o) {
        std::vector<float> wo(static_cast<std::size_t>(d * d));
        for (std::int64_t i = 0; i < d; ++i)
          std::copy_n(w.data.begin() + i * 3 * d + o * d, d, wo.begin() + i * d);
        m.set_weight(step.weights[2 * o], make_tensor(d, d, std::move(wo)), file_and(f, wname));
        m.set_weight(step.weights[2 * o + 1],
                     make_tensor(1, d, std::vector<float>(b.data.begin() + o * d, b.data.begin() + (o + 1) * d)),
                     file_and(f, bname));
      }
      continue;
    }
    if (spec.family == ModelFamily::sage) {
      // The GEMM reads [mean of neighbours | self] (2 in): lin_l's weight over the first half,
      // lin_r's over the second, lin_l's bias.
      const std::int64_t in = step.in_cols / 2;
      const std::string& lname = names.at(step.name + ".weight_l");
      const std::string& rname = names.at(step.name + ".weight_r");
      HostTensor wl = linear_weight(f, lname, in, step.out_cols), wr = linear_weight(f, rname, in, step.out_cols);
      std::vector<float> stacked = std::move(wl.data);
      stacked.insert(stacked.end(), wr.data.begin(), wr.data.end());
      m.set_weight(step.weights[0], make_tensor(step.in_cols, step.out_cols, std::move(stacked)), file_and(f, lname));
      m.set_weight(step.weights[1], vector_of(f, bname, step.out_cols), file_and(f, bname));
      continue;
    }
    const std::string& wname = names.at(step.name + ".weight");
    HostTensor w = linear_weight(f, wname, step.in_cols, step.out_cols);
    HostTensor b = vector_of(f, bname, step.out_cols);
    if (config.batch_norm && ends_with(step.name, ".mlp1")) {
      // Inference-mode batch norm after the Linear: y = gamma (xW + b - mean) / sqrt(var + eps) + beta.
      std::vector<HostTensor> bn;
      for (const char* p : kBatchNorm) bn.push_back(vector_of(f, names.at(step.name + ".norm." + p), step.out_cols));
      for (std::int64_t o = 0; o < step.out_cols; ++o) {
        const double var = bn[3].data[static_cast<std::size_t>(o)];
        if (var < 0) throw InputError(file_and(f, names.at(step.name + ".norm.running_var")), "negative variance at " + std::to_string(o));
        const double scale = bn[0].data[static_cast<std::size_t>(o)] / std::sqrt(var + config.batch_norm_eps);
        for (std::int64_t i = 0; i < step.in_cols; ++i) {
          float& x = w.data[static_cast<std::size_t>(i * step.out_cols + o)];
          x = static_cast<float>(x * scale);
        }
        float& bias = b.data[static_cast<std::size_t>(o)];
        bias = static_cast<float>((bias - bn[2].data[static_cast<std::size_t>(o)]) * scale + bn[1].data[static_cast<std::size_t>(o)]);
      }
    }
    m.set_weight(step.weights[0], std::move(w), file_and(f, wname));
    m.set_weight(step.weights[1], std::move(b), file_and(f, bname));
  }
  return m;
}

}  // namespace dype::rt
