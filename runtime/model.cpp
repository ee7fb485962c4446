#include "runtime/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

#include "common/error.h"
#include "graph/characteristics.h"
#include "graph/generators.h"
#include "hw/device_ipc_memory.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/spmm.h"
#include "kernels/cpu/window_attention.h"

namespace dype::rt {

using kernels::OpKind;
using kernels::cpu::Epilogue;

HostTensor HostTensor::zeros(std::int64_t rows, std::int64_t cols) {
  HostTensor t;
  t.rows = rows;
  t.cols = cols;
  t.data.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  return t;
}

HostTensor HostTensor::shape_only(std::int64_t rows, std::int64_t cols) {
  HostTensor t;
  t.rows = rows;
  t.cols = cols;
  t.size_only = true;
  return t;
}

HostTensor make_tensor(std::int64_t rows, std::int64_t cols, std::vector<float> data) {
  if (static_cast<std::int64_t>(data.size()) != rows * cols) {
    throw InputError("tensor", "holds " + std::to_string(data.size()) + " values, shape [" +
                                   std::to_string(rows) + " x " + std::to_string(cols) +
                                   "] needs " + std::to_string(rows * cols));
  }
  HostTensor t;
  t.rows = rows;
  t.cols = cols;
  t.data = std::move(data);
  return t;
}

const char* to_string(ModelFamily f) {
  switch (f) {
    case ModelFamily::gcn:
      return "gcn";
    case ModelFamily::gin:
      return "gin";
    case ModelFamily::sage:
      return "sage";
    case ModelFamily::transformer:
      return "transformer";
  }
  return "unknown";
}

const char* to_string(Nonlinearity a) {
  return a == Nonlinearity::gelu ? "gelu" : "relu";
}

// ---- models -------------------------------------------------------------------------------------

int Model::add_weight(std::int64_t rows, std::int64_t cols, std::uint64_t stream, float scale,
                      float center) {
  HostTensor t = spec_.materialize_weights ? HostTensor::zeros(rows, cols)
                                           : HostTensor::shape_only(rows, cols);
  if (spec_.materialize_weights) {
    kernels::FeatureOptions o;
    o.low = center - scale;
    o.high = center + scale;
    kernels::fill_features(t.data, cols, spec_.seed * 1000003ull + stream, o);
  }
  weights_.push_back(std::move(t));
  return static_cast<int>(weights_.size()) - 1;
}

void Model::set_weight(int i, HostTensor values, const std::string& what) {
  HostTensor& w = weights_.at(static_cast<std::size_t>(i));
  if (values.rows != w.rows || values.cols != w.cols) {
    throw InputError(what, "shape [" + std::to_string(values.rows) + ", " +
                               std::to_string(values.cols) + "], the model needs [" +
                               std::to_string(w.rows) + ", " + std::to_string(w.cols) + "]");
  }
  if (static_cast<std::int64_t>(values.data.size()) != values.rows * values.cols) {
    throw InputError(what, "holds " + std::to_string(values.data.size()) + " values for its shape");
  }
  w = std::move(values);
}

namespace {
void check_spec(const ModelSpec& s) {
  if (s.layers < 1) throw InputError("model.layers", "must be >= 1");
  if (s.family == ModelFamily::transformer) {
    if (s.d_model < 1 || s.heads < 1 || s.d_model % s.heads != 0)
      throw InputError("model.d_model", "must be a positive multiple of heads");
    if (s.ffn < 1) throw InputError("model.ffn", "must be >= 1");
    if (!(s.layer_norm_eps > 0.0f)) throw InputError("model.layer_norm_eps", "must be > 0");
  } else {
    if (s.in_features < 1) throw InputError("model.in_features", "must be >= 1");
    if (s.hidden < 1) throw InputError("model.hidden", "must be >= 1");
    if (s.out_features < 0)
      throw InputError("model.out_features", "must be >= 1 (or 0 for hidden)");
  }
}
// The GEMM epilogue of a hidden layer: bias, then the model's activation.
Epilogue hidden_epilogue(const ModelSpec& s) {
  return s.activation == Nonlinearity::gelu ? Epilogue::bias_gelu : Epilogue::bias_relu;
}

}  // namespace

Model Model::gcn(ModelSpec spec) {
  spec.family = ModelFamily::gcn;
  check_spec(spec);
  Model m(spec);
  std::int64_t width = spec.in_features;
  std::uint64_t stream = 0;
  for (int l = 0; l < spec.layers; ++l) {
    const bool last = l + 1 == spec.layers;
    m.steps_.push_back({"l" + std::to_string(l) + ".aggregate",
                        l,
                        OpKind::spmm,
                        false,
                        width,
                        width,
                        Epilogue::none,
                        {}});
    const float sc = 1.0f / std::sqrt(static_cast<float>(width));
    const std::int64_t out = last ? spec.out_width() : spec.hidden;
    Step g{"l" + std::to_string(l) + ".update",           l, OpKind::gemm, false, width, out,
           last ? Epilogue::bias : hidden_epilogue(spec), {}};
    g.weights = {m.add_weight(width, out, stream++, sc), m.add_weight(1, out, stream++, 0.1f)};
    m.steps_.push_back(g);
    width = out;
  }
  return m;
}

Model Model::gin(ModelSpec spec) {
  spec.family = ModelFamily::gin;
  check_spec(spec);
  Model m(spec);
  std::int64_t width = spec.in_features;
  std::uint64_t stream = 0;
  for (int l = 0; l < spec.layers; ++l) {
    const bool last = l + 1 == spec.layers;
    const std::string p = "l" + std::to_string(l) + ".";
    m.steps_.push_back({p + "aggregate", l, OpKind::spmm, false, width, width, Epilogue::none, {}});
    // PyG's GIN: each layer's MLP is [width, out, out] (out = hidden, the last layer's
    // out_features).
    const std::int64_t out = last ? spec.out_width() : spec.hidden;
    Step a{p + "mlp1", l, OpKind::gemm, false, width, out, hidden_epilogue(spec), {}};
    a.weights = {m.add_weight(width, out, stream++, 1.0f / std::sqrt(static_cast<float>(width))),
                 m.add_weight(1, out, stream++, 0.1f)};
    m.steps_.push_back(a);
    Step b{
        p + "mlp2", l, OpKind::gemm, false, out, out, last ? Epilogue::bias : hidden_epilogue(spec),
        {}};
    b.weights = {m.add_weight(out, out, stream++, 1.0f / std::sqrt(static_cast<float>(out))),
                 m.add_weight(1, out, stream++, 0.1f)};
    m.steps_.push_back(b);
    width = out;
  }
  return m;
}

Model Model::sage(ModelSpec spec) {
  spec.family = ModelFamily::sage;
  check_spec(spec);
  Model m(spec);
  std::int64_t width = spec.in_features;
  std::uint64_t stream = 0;
  for (int l = 0; l < spec.layers; ++l) {
    const bool last = l + 1 == spec.layers;
    const std::string p = "l" + std::to_string(l) + ".";
    // [A_mean h | h] in one SpMM over the interleaved matrix (Graph::sage_mean), then one GEMM with
    // [W_l ; W_r] stacked: lin_l(mean of neighbours) + lin_r(h) + b.
    m.steps_.push_back(
        {p + "aggregate", l, OpKind::spmm, false, width, 2 * width, Epilogue::none, {}});
    const std::int64_t out = last ? spec.out_width() : spec.hidden;
    Step g{p + "update",
           l,
           OpKind::gemm,
           false,
           2 * width,
           out,
           last ? Epilogue::bias : hidden_epilogue(spec),
           {}};
    g.weights = {
        m.add_weight(2 * width, out, stream++, 1.0f / std::sqrt(static_cast<float>(2 * width))),
        m.add_weight(1, out, stream++, 0.1f)};
    m.steps_.push_back(g);
    width = out;
  }
  return m;
}

Model Model::transformer(ModelSpec spec) {
  spec.family = ModelFamily::transformer;
  check_spec(spec);
  Model m(spec);
  const std::int64_t d = spec.d_model;
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  const float sf = 1.0f / std::sqrt(static_cast<float>(spec.ffn));
  std::uint64_t stream = 0;
  // Residual roles per step; all none for the paper's bare block.
  const bool rn = spec.residual_norm, pre = rn && spec.norm_first;
  // A step's role for the skip tensor (d wide); none in the bare block.
  auto carry = [&](Step& s, Residual r) {
    s.residual = rn ? r : Residual::none;
    s.carry_cols = s.residual == Residual::none ? 0 : d;
  };
  auto gemm = [&](const std::string& name, int l, std::int64_t in, std::int64_t out, Epilogue e,
                  float scale, Residual r) {
    Step g{name, l, OpKind::gemm, false, in, out, e, {}};
    g.weights = {m.add_weight(in, out, stream++, scale), m.add_weight(1, out, stream++, 0.1f)};
    carry(g, r);
    return g;
  };
  auto norm = [&](const std::string& name, int l, Residual r) {
    Step n{name, l, OpKind::layer_norm, false, d, d, Epilogue::none, {}};
    n.weights = {m.add_weight(1, d, stream++, 0.1f, 1.0f), m.add_weight(1, d, stream++, 0.1f)};
    carry(n, r);
    return n;
  };
  const Epilogue add = rn ? Epilogue::bias_residual : Epilogue::bias;
  for (int l = 0; l < spec.layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    // Post-norm (PyTorch's default): x = norm1(x + attn(x)); x = norm2(x + ffn(x)).
    // Pre-norm: x = x + attn(norm1(x)); x = x + ffn(norm2(x)).
    if (pre) m.steps_.push_back(norm(p + "norm1", l, Residual::save));
    Step qkv{p + "qkv", l, OpKind::gemm, true, d, d, Epilogue::bias, {}};
    for (int i = 0; i < 3; ++i) {
      qkv.weights.push_back(m.add_weight(d, d, stream++, sd));
      qkv.weights.push_back(m.add_weight(1, d, stream++, 0.1f));
    }
    carry(qkv, pre ? Residual::pass : Residual::save);
    m.steps_.push_back(qkv);
    Step att{p + "attention", l, OpKind::window_attention, false, d, d, Epilogue::none, {}};
    carry(att, Residual::pass);
    m.steps_.push_back(att);
    m.steps_.push_back(gemm(p + "out_proj", l, d, d, add, sd, Residual::add));
    if (rn && !pre) m.steps_.push_back(norm(p + "norm1", l, Residual::none));
    if (pre) m.steps_.push_back(norm(p + "norm2", l, Residual::save));
    m.steps_.push_back(gemm(p + "ffn1", l, d, spec.ffn, hidden_epilogue(spec), sd,
                            pre ? Residual::pass : Residual::save));
    m.steps_.push_back(gemm(p + "ffn2", l, spec.ffn, d, add, sf, Residual::add));
    if (rn && !pre) m.steps_.push_back(norm(p + "norm2", l, Residual::none));
  }
  return m;
}

Model Model::make(ModelSpec spec) {
  switch (spec.family) {
    case ModelFamily::gcn:
      return gcn(spec);
    case ModelFamily::gin:
      return gin(spec);
    case ModelFamily::sage:
      return sage(spec);
    case ModelFamily::transformer:
      return transformer(spec);
  }
  throw Error("unknown model family");
}

std::vector<kernels::OpShape> Model::kernel_shapes(const Characteristics& c) const {
  std::vector<kernels::OpShape> out;
  const std::int64_t rows = is_gnn() ? c.nodes : c.seq_len;
  for (const Step& s : steps_) {
    kernels::OpShape sh;
    sh.kind = s.op;
    switch (s.op) {
      case OpKind::spmm:
        sh.m = c.nodes * (s.out_cols / s.in_cols);  // SAGE's interleaved matrix has 2 rows per node
        sh.k = c.nodes;
        sh.n = s.in_cols;
        sh.nnz = c.nnz;
        sh.degree_skew = c.degree_skew;
        sh.locality = c.locality;
        break;
      case OpKind::window_attention:
        sh.m = rows;
        sh.n = s.out_cols;
        sh.seq_len = rows;
        sh.window = c.window;
        sh.heads = spec_.heads;
        sh.head_dim = spec_.d_model / spec_.heads;
        break;
      case OpKind::layer_norm:
      case OpKind::softmax:
        sh.m = rows;
        sh.n = s.out_cols;
        break;
      default:
        sh.m = rows;
        sh.k = s.in_cols;
        sh.n = s.out_cols * s.launches();
        break;
    }
    out.push_back(sh);
  }
  return out;
}

double Model::output_bytes(int k, const Characteristics& c) const {
  const Step& s = step(k);
  const std::int64_t rows = is_gnn() ? c.nodes : c.seq_len;
  double cols = 0.0;
  for (int o = 0; o < s.outputs(); ++o) cols += static_cast<double>(s.output_cols(o));
  return 4.0 * static_cast<double>(rows) * cols;
}

// ---- requests -----------------------------------------------------------------------------------

Request Request::gnn(std::shared_ptr<const Graph> graph, HostTensor x) {
  Request r;
  r.graph_ = std::move(graph);
  r.x_ = std::move(x);
  return r;
}

Request Request::transformer(HostTensor x, std::int64_t window) {
  Request r;
  r.x_ = std::move(x);
  r.window_ = window;
  return r;
}

struct Request::External {
  std::optional<DeviceFeatures> device;
  std::optional<MappedFeatures> mapped;
  // Not a std::once_flag: the copy throws (memory that shrank, a read past its end), and an
  // exception out of std::call_once unwinds through ThreadSanitizer's pthread_once interceptor
  // without ending it, leaving the thread's ignores on (the test exits 66 under TSan).
  std::mutex mu;
  std::atomic<bool> copied{false};
  HostTensor host;
};

void Request::attach(std::optional<DeviceFeatures> device, std::optional<MappedFeatures> mapped) {
  const bool has_memory = device ? device->memory != nullptr : mapped && mapped->data != nullptr;
  if (!has_memory) throw InputError("request.x", "external features without their memory");
  x_ = HostTensor{};
  x_.rows = device ? device->rows : mapped->rows;
  x_.cols = device ? device->cols : mapped->cols;
  external_ = std::make_shared<External>();
  external_->device = std::move(device);
  external_->mapped = std::move(mapped);
}

Request Request::gnn(std::shared_ptr<const Graph> graph, DeviceFeatures x) {
  Request r = gnn(std::move(graph), HostTensor{});
  r.attach(std::move(x), std::nullopt);
  return r;
}

Request Request::transformer(DeviceFeatures x, std::int64_t window) {
  Request r = transformer(HostTensor{}, window);
  r.attach(std::move(x), std::nullopt);
  return r;
}

Request Request::gnn(std::shared_ptr<const Graph> graph, MappedFeatures x) {
  Request r = gnn(std::move(graph), HostTensor{});
  r.attach(std::nullopt, std::move(x));
  return r;
}

Request Request::transformer(MappedFeatures x, std::int64_t window) {
  Request r = transformer(HostTensor{}, window);
  r.attach(std::nullopt, std::move(x));
  return r;
}

const HostTensor& Request::input() const {
  if (!external_) return x_;
  External& e = *external_;
  if (!e.copied.load(std::memory_order_acquire)) {
    const std::lock_guard lock(e.mu);
    if (!e.copied.load(std::memory_order_relaxed)) {  // a copy that threw is tried again
      HostTensor h = HostTensor::zeros(x_.rows, x_.cols);
      if (const DeviceFeatures* d = device_input()) {
        d->memory->read(d->offset, h.data.data(), h.bytes());
      } else {
        const MappedFeatures& m = *e.mapped;
        std::copy(m.data, m.data + h.data.size(), h.data.begin());
        check_mapped_intact(m);
      }
      e.host = std::move(h);
      e.copied.store(true, std::memory_order_release);
    }
  }
  return e.host;
}

const DeviceFeatures* Request::device_input() const {
  return external_ && external_->device ? &*external_->device : nullptr;
}

const MappedFeatures* Request::mapped_input() const {
  return external_ && external_->mapped ? &*external_->mapped : nullptr;
}

void check_mapped_intact(const MappedFeatures& x) {
  if (x.intact && !x.intact())
    throw InputError("input 'x'",
                     "its shared-memory region shrank while it was read (the object behind it was "
                     "truncated): the request is refused; register the region again");
}

Characteristics Request::characteristics() const {
  Characteristics c;
  if (graph_) {
    c.nodes = graph_->nodes;
    c.nnz = graph_->nnz;
    c.degree_skew = graph_->degree_skew;
    c.locality = graph_->locality;
    c.feature_len = x_.cols;
  } else {
    c.seq_len = x_.rows;
    c.window = window_;
    c.feature_len = x_.cols;
  }
  return c;
}

void validate_request(const Model& model, const Request& r) {
  // Device or mapped features are not read for this: their shape is the request's.
  const bool external = r.device_input() || r.mapped_input();
  const bool size_only = !external && r.input().size_only;
  if (!external && !size_only &&
      static_cast<std::int64_t>(r.input().data.size()) != r.rows() * r.cols())
    throw InputError("request.x", "data size does not match its shape");
  if (model.is_gnn()) {
    if (!r.graph()) throw InputError("request.graph", "a GNN request needs a graph");
    if (r.rows() != r.graph()->nodes)
      throw InputError("request.x", "has " + std::to_string(r.rows()) + " rows, the graph " +
                                        std::to_string(r.graph()->nodes) + " nodes");
    if (r.cols() != model.spec().in_features)
      throw InputError("request.x", "has " + std::to_string(r.cols()) +
                                        " features, the model expects " +
                                        std::to_string(model.spec().in_features));
    const std::int32_t layout = model.family() == ModelFamily::sage ? 2 : 1;
    if (r.graph()->rows_per_node != layout)
      throw InputError(
          "request.graph",
          std::string("was built for another model family (") +
              (layout == 2 ? "SAGE needs Graph::sage_mean" : "SAGE's interleaved matrix") + ")");
    if (!size_only && r.graph()->size_only())
      throw InputError("request.graph", "shape-only graph with real features");
  } else {
    if (r.rows() < 1) throw InputError("request.x", "needs at least one token");
    if (r.cols() != model.spec().d_model)
      throw InputError("request.x", "has " + std::to_string(r.cols()) + " columns, d_model is " +
                                        std::to_string(model.spec().d_model));
    if (r.window() < 0) throw InputError("request.window", "must be >= 0");
  }
}

namespace {

// A tensor of the reference chain: the request's input, borrowed (never copied), or a kernel's
// output. SpMM and GEMM overwrite their whole output, so theirs is allocated without the zero fill
// (on a full graph that is tens of MB a step, filled on one thread before the kernel ran).
struct Activation {
  std::int64_t rows = 0, cols = 0;
  std::unique_ptr<float[]> owned;
  const float* at = nullptr;

  static Activation borrow(const HostTensor& t) { return {t.rows, t.cols, nullptr, t.data.data()}; }
  static Activation allocate(std::int64_t rows, std::int64_t cols, bool overwritten) {
    const auto n = static_cast<std::size_t>(rows * cols);
    Activation a{
        rows, cols,
        overwritten ? std::make_unique_for_overwrite<float[]>(n) : std::make_unique<float[]>(n),
        nullptr};
    a.at = a.owned.get();
    return a;
  }
  std::size_t size() const { return static_cast<std::size_t>(rows * cols); }
  std::span<const float> in() const { return {at, size()}; }
  std::span<float> out() { return {owned.get(), size()}; }
};

}  // namespace

HostTensor reference_forward(const Model& model, const Request& r) {
  validate_request(model, r);
  if (r.input().size_only) throw InputError("request.x", "reference needs real data");
  std::vector<Activation> act;
  act.push_back(Activation::borrow(r.input()));
  for (const Step& s : model.steps()) {
    const std::int64_t rows = act[0].rows;
    std::vector<Activation> next;
    if (s.op == OpKind::spmm) {
      const Graph& g = *r.graph();
      kernels::CsrView<std::int32_t> a{g.csr_rows(), g.nodes, g.indptr, g.indices, g.values};
      Activation y = Activation::allocate(rows, s.out_cols,
                                          true);  // [csr_rows x in_cols] is [rows x out_cols]
      kernels::cpu::spmm(a, act[0].in(), s.in_cols, y.out());
      next.push_back(std::move(y));
    } else if (s.op == OpKind::window_attention) {
      Activation y = Activation::allocate(rows, s.out_cols, false);
      kernels::cpu::window_attention(
          act[0].in(), act[1].in(), act[2].in(), y.out(),
          {rows, model.spec().heads, model.spec().d_model / model.spec().heads, r.window()});
      next.push_back(std::move(y));
    } else if (s.op == OpKind::layer_norm) {
      Activation y = Activation::allocate(rows, s.out_cols, false);
      kernels::cpu::layer_norm_rows(act[0].in(), model.weight(s.weights[0]).data,
                                    model.weight(s.weights[1]).data, y.out(), rows, s.out_cols,
                                    model.spec().layer_norm_eps);
      next.push_back(std::move(y));
    } else {
      std::span<const float> residual;
      if (s.residual == Residual::add) residual = act.back().in();
      for (int o = 0; o < s.launches(); ++o) {
        Activation y = Activation::allocate(rows, s.out_cols, true);
        kernels::cpu::gemm(act[0].in(), model.weight(s.weights[2 * o]).data,
                           model.weight(s.weights[2 * o + 1]).data, y.out(),
                           {rows, s.in_cols, s.out_cols}, s.epilogue, residual);
        next.push_back(std::move(y));
      }
    }
    // The skip connection rides along as the last tensor (Residual).
    if (s.residual == Residual::save) next.push_back(std::move(act[0]));
    if (s.residual == Residual::pass) next.push_back(std::move(act.back()));
    act = std::move(next);
  }
  const Activation& y = act[0];
  return make_tensor(y.rows, y.cols, std::vector<float>(y.at, y.at + y.size()));
}

HostTensor take_rows(const HostTensor& y, std::span<const std::int64_t> rows) {
  HostTensor t;
  t.rows = static_cast<std::int64_t>(rows.size());
  t.cols = y.cols;
  // A timing-only answer has a shape and no values: its rows are a shape too.
  t.size_only = y.size_only;
  if (!y.size_only && y.data.size() < static_cast<std::size_t>(y.rows * y.cols))
    throw Error("take_rows: a tensor of " + std::to_string(y.rows) + " x " +
                std::to_string(y.cols) + " holds " + std::to_string(y.data.size()) + " values");
  if (!t.size_only) t.data.resize(rows.size() * static_cast<std::size_t>(y.cols));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= y.rows)
      throw InputError(
          "node_ids[" + std::to_string(i) + "]",
          "node " + std::to_string(rows[i]) + " out of range [0, " + std::to_string(y.rows) + ")");
    if (!t.size_only)
      std::copy_n(y.data.begin() + rows[i] * y.cols, y.cols,
                  t.data.begin() + static_cast<std::ptrdiff_t>(i * y.cols));
  }
  return t;
}

double relative_error(const HostTensor& a, const HostTensor& b) {
  if (a.rows != b.rows || a.cols != b.cols || a.data.size() != b.data.size()) return INFINITY;
  double scale = 1e-30, err = 0.0;
  for (std::size_t i = 0; i < b.data.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(b.data[i])));
    err = std::max(err, static_cast<double>(std::fabs(a.data[i] - b.data[i])));
  }
  return err / scale;
}

}  // namespace dype::rt
