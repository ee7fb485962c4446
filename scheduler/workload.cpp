#include "scheduler/workload.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "hw/config_node.h"
#include "common/error.h"

namespace dype::sched {

using kernels::OpKind;

std::int64_t ModelConfig::dim(const std::string& key, const std::string& where) const {
  if (!key.empty() && std::isdigit(static_cast<unsigned char>(key[0]))) {
    try {
      return std::stoll(key);
    } catch (const std::exception&) {
      throw InputError(where, "bad number '" + key + "'");
    }
  }
  for (const auto& [name, value] : dims) {
    if (name == key) return value;
  }
  throw InputError(where, "unknown dim '" + key + "' (not in the model's dims)");
}

// Format:
//   name: gcn
//   family: gnn            # gnn: rows = graph nodes; transformer: rows = tokens
//   layers: 2
//   heads: 8               # transformer only
//   dims: {hidden: 128}
//   layer:                 # one layer's kernels in order; `out` = dim name or number
//     - {name: aggregate, op: spmm}
//     - {name: update, op: gemm, out: hidden}
//     (GraphSAGE: {name: aggregate, op: spmm, with_self: true}: [mean of neighbours | self])
//   last_out: 16           # optional: width of the last layer's final GEMM (classes)
// Unknown keys are errors; every error names the file and the key path.
ModelConfig parse_model_config(const std::string& yaml_text, const std::string& source) {
  const hw::ConfigNode root = hw::ConfigNode::parse(yaml_text, source);
  root.expect_keys({"name", "family", "layers", "heads", "dims", "layer", "last_out"});
  ModelConfig c;
  c.name = root.get_string("name", "model");
  c.family = root.get_string("family", "");
  if (c.family != "gnn" && c.family != "transformer") {
    root.child("family").fail("must be 'gnn' or 'transformer', got '" + c.family + "'");
  }
  const std::int64_t layers = root.get_int("layers", 1);
  if (layers < 1 || layers > 100000) root.child("layers").fail("must be in [1, 100000], got " + std::to_string(layers));
  c.layers = static_cast<int>(layers);
  c.heads = root.get_int("heads", 1);
  if (c.heads < 1) root.child("heads").fail("must be >= 1, got " + std::to_string(c.heads));
  c.last_out = root.get_string("last_out", "");
  if (const auto d = root.optional_child("dims")) {
    d->expect_map();
    for (const auto& it : d->yaml()) {
      const std::string key = it.first.as<std::string>();
      const hw::ConfigNode dim = d->child(key);
      const std::int64_t v = dim.as_int();
      if (v <= 0) dim.fail("must be > 0, got " + std::to_string(v));
      c.dims.emplace_back(key, v);
    }
  }
  const hw::ConfigNode layer = root.child("layer");
  layer.expect_sequence();
  if (layer.size() == 0) layer.fail("must list the layer's kernels");
  for (std::size_t i = 0; i < layer.size(); ++i) {
    const hw::ConfigNode k = layer.at(i);
    k.expect_keys({"name", "op", "out", "with_self"});
    KernelTemplate t;
    const std::string op_name = k.get_string("op");
    const auto op = kernels::op_kind_from_string(op_name);
    if (!op) k.child("op").fail("unknown op '" + op_name + "'");
    t.op = *op;
    t.name = k.get_string("name", op_name);
    t.out = k.get_string("out", "same");
    if (t.out != "same") c.dim(t.out, k.child("out").where());  // fail early on unknown dims
    t.with_self = k.get_bool("with_self", false);
    if (t.with_self && t.op != kernels::OpKind::spmm) k.child("with_self").fail("only an spmm aggregation carries the node itself");
    c.layer.push_back(t);
  }
  if (!c.last_out.empty()) c.dim(c.last_out, root.child("last_out").where());
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open model config");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_model_config(ss.str(), path);
}

Workload build_workload(const ModelConfig& c, const InputCharacteristics& in) {
  const std::string where = "input characteristics for model '" + c.name + "'";
  const bool gnn = c.family == "gnn";
  std::int64_t rows = 0;
  std::int64_t width = in.feature_len;
  if (gnn) {
    if (in.nodes <= 0) throw InputError(where + ".nodes", "must be > 0");
    if (in.nnz <= 0) throw InputError(where + ".nnz", "must be > 0");
    if (in.feature_len <= 0) throw InputError(where + ".feature_len", "must be > 0");
    rows = in.nodes;
  } else {
    if (in.seq_len <= 0) throw InputError(where + ".seq_len", "must be > 0");
    if (in.window <= 0) throw InputError(where + ".window", "must be > 0");
    if (in.window > in.seq_len) {
      throw InputError(where + ".window", "window " + std::to_string(in.window) +
                                              " exceeds seq_len " + std::to_string(in.seq_len));
    }
    rows = in.seq_len;
    if (width <= 0) width = c.dim("d_model", c.name + ".dims");
  }
  Workload wl;
  wl.model = c.name;
  const double m = static_cast<double>(rows);
  for (int l = 0; l < c.layers; ++l) {
    for (std::size_t j = 0; j < c.layer.size(); ++j) {
      const KernelTemplate& t = c.layer[j];
      const bool last_gemm = l == c.layers - 1 && j == c.layer.size() - 1 && !c.last_out.empty();
      std::int64_t out = t.out == "same" ? width : c.dim(t.out, c.name + ".layer.out");
      if (last_gemm) out = c.dim(c.last_out, c.name + ".last_out");
      Kernel k;
      k.name = "l" + std::to_string(l) + "." + t.name;
      k.layer = l;
      k.shape.kind = t.op;
      k.shape.degree_skew = in.degree_skew;
      if (t.op == OpKind::spmm) k.shape.locality = in.locality;
      k.input_bytes = 4.0 * m * static_cast<double>(width);
      switch (t.op) {
        case OpKind::spmm:
          if (!gnn) throw InputError(c.name + ".layer." + t.name, "spmm needs a gnn model (a graph)");
          // Aggregation keeps the feature length; with the node itself beside it, the interleaved
          // matrix has 2 rows and one more nonzero per node and the output is twice as wide.
          out = t.with_self ? 2 * width : width;
          k.shape.m = t.with_self ? 2 * rows : rows;
          k.shape.k = rows;
          k.shape.n = width;
          k.shape.nnz = t.with_self ? in.nnz + rows : in.nnz;
          k.flops = 2.0 * static_cast<double>(k.shape.nnz) * static_cast<double>(width);
          break;
        case OpKind::gemm:
          k.shape.m = rows;
          k.shape.k = width;
          k.shape.n = out;
          k.flops = 2.0 * m * static_cast<double>(width) * static_cast<double>(out);
          break;
        case OpKind::window_attention: {
          if (gnn) throw InputError(c.name + ".layer." + t.name, "window_attention needs a transformer model");
          // Input is the fused [Q|K|V] projection (width 3d) or Q alone; output is d wide.
          const std::int64_t d = out;
          if (d % c.heads != 0) throw InputError(c.name + ".heads", "does not divide the attention width");
          k.shape.m = rows;
          k.shape.n = d;
          k.shape.seq_len = in.seq_len;
          k.shape.window = in.window;
          k.shape.heads = c.heads;
          k.shape.head_dim = d / c.heads;
          // QK^T over the band and S V: 2 flops per MAC, (window + 1) keys per token, both products.
          k.flops = 4.0 * m * static_cast<double>(in.window + 1) * static_cast<double>(d);
          break;
        }
        case OpKind::softmax:
        case OpKind::layer_norm:
          out = width;
          k.shape.m = rows;
          k.shape.n = width;
          k.flops = 5.0 * m * static_cast<double>(width);
          break;
      }
      k.output_bytes = 4.0 * m * static_cast<double>(out);
      width = out;
      wl.kernels.push_back(std::move(k));
    }
  }
  return wl;
}

}  // namespace dype::sched
