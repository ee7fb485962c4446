#include "runtime/daemon/kserve/request_builder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <optional>
#include <span>

#include "common/error.h"
#include "graph/edge_index.h"
#include "hw/device_ipc_memory.h"
#include "runtime/daemon/errors.h"
#include "runtime/daemon/kserve/finite_check.h"

namespace dype::rt::daemon {
namespace {

const Tensor& need(const InferRequest& in, const std::string& name) {
  const Tensor* t = in.find(name);
  if (!t) throw InputError("inputs", "missing input '" + name + "'");
  return *t;
}

// Index of the first NaN/Inf in v, or v.size(): for the message, once a value is known to be one.
std::size_t first_non_finite(std::span<const float> v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return i;
  return v.size();
}

bool all_finite(std::span<const float> v) {
  return all_finite_f32(v.data(), v.size());
}

// Appends `in` to `out` (its capacity reserved) and says whether every value is finite, in one
// pass: block by block, each checked while in L1, so the request's bytes are read once and the
// buffer written once (no zero-fill).
bool copy_all_finite(std::span<const float> in, std::vector<float>& out) {
  constexpr std::size_t kBlock = 4096;
  bool finite = true;
  for (std::size_t b = 0; b < in.size(); b += kBlock) {
    const std::span<const float> block = in.subspan(b, std::min(kBlock, in.size() - b));
    out.insert(out.end(), block.begin(), block.end());
    finite &= all_finite(std::span<const float>(out).subspan(b, block.size()));
  }
  return finite;
}

}  // namespace

namespace {

void check_feature_shape(const Tensor& x, std::int64_t cols_expected, const char* cols_name) {
  if (x.shape.size() != 2)
    throw InputError("input '" + x.name + "'", "must have rank 2 [rows, " + std::string(cols_name) + "], got rank " +
                                      std::to_string(x.shape.size()));
  if (x.shape[1] != cols_expected)
    throw InputError("input '" + x.name + "'", "shape[1] is " + std::to_string(x.shape[1]) + ", the model expects " +
                                      std::string(cols_name) + " = " + std::to_string(cols_expected));
}

// The error for features holding a NaN/Inf, naming its row and column.
InputError non_finite(const Tensor& x, std::span<const float> v) {
  const std::size_t i = first_non_finite(v);
  const auto c = static_cast<std::size_t>(x.shape[1]);
  return InputError(
      "input '" + x.name + "'[" + std::to_string(i / c) + "][" + std::to_string(i % c) + "]",
      std::string("is ") + (std::isnan(v[i]) ? "NaN" : "infinite") + "; features must be finite");
}

// x left in GPU memory, read to the host (graph registration and other host-only uses).
std::vector<float> read_device_features(const Tensor& x) {
  std::vector<float> v(static_cast<std::size_t>(x.shape[0] * x.shape[1]));
  x.device->read(x.shared_memory->offset, v.data(), v.size() * sizeof(float));
  return v;
}

}  // namespace

HostTensor features(const Tensor& x, std::int64_t cols_expected, const char* cols_name) {
  check_feature_shape(x, cols_expected, cols_name);
  if (x.device) {
    std::vector<float> v = read_device_features(x);
    if (first_non_finite(v) != v.size()) throw non_finite(x, v);
    return make_tensor(x.shape[0], x.shape[1], std::move(v));
  }
  std::vector<float> scratch;
  const std::span<const float> in = x.f32_span(scratch);
  // The engine owns its input: the one copy of x (scratch already is one when the bytes were not
  // aligned for float), checked while it is made.
  std::vector<float> v;
  bool finite = true;
  if (!scratch.empty()) {
    finite = first_non_finite(scratch) == scratch.size();
    v = std::move(scratch);
  } else {
    v.reserve(in.size());
    finite = copy_all_finite(in, v);
  }
  if (!finite) throw non_finite(x, v);
  return make_tensor(x.shape[0], x.shape[1], std::move(v));
}

std::optional<MappedFeatures> features_in_place(const Tensor& x, std::int64_t cols_expected,
                                                const char* cols_name, const InferRequest& in) {
  if (!x.view || x.device || x.datatype != "FP32") return std::nullopt;
  const std::string where = "inputs['" + x.name + "']";
  std::shared_ptr<const HeldMemory> held;
  for (const auto& [w, h] : in.held)
    if (w == where) held = h;
  const std::string_view b = x.bytes();
  // Held by nothing (a view the caller may reuse), or not aligned for float: features() copies it.
  if (!held || reinterpret_cast<std::uintptr_t>(b.data()) % alignof(float) != 0)
    return std::nullopt;
  check_feature_shape(x, cols_expected, cols_name);
  const std::span<const float> v(reinterpret_cast<const float*>(b.data()),
                                 b.size() / sizeof(float));
  if (!held->known_finite_f32(b.data(), b.size()) && !all_finite(v)) throw non_finite(x, v);
  auto intact = [held, where] {
    try {
      held->check_read(where);
      return true;
    } catch (const InputError&) {
      return false;
    }
  };
  return MappedFeatures{held, v.data(), x.shape[0], x.shape[1], std::move(intact)};
}

DeviceFeatures features_on_device(const Tensor& x, std::int64_t cols_expected,
                                  const char* cols_name) {
  check_feature_shape(x, cols_expected, cols_name);
  const auto n = static_cast<std::size_t>(x.shape[0] * x.shape[1]);
  // Checked where it lies; read to the host only to name the first bad value.
  if (!x.device->all_finite_f32(x.shared_memory->offset, n))
    throw non_finite(x, read_device_features(x));
  return {x.device, x.shared_memory->offset, x.shape[0], x.shape[1]};
}

namespace {

// Views the request's bytes in place where it can (see Tensor::f32_span); scratch holds a copy otherwise.
std::optional<std::span<const float>> optional_f32(const InferRequest& in, const char* name, std::int64_t expected,
                                                   std::vector<float>& scratch) {
  const Tensor* t = in.find(name);
  if (!t) return std::nullopt;
  if (t->shape.size() != 1 || t->shape[0] != expected)
    throw InputError(std::string("input '") + name + "'", "must have shape [" + std::to_string(expected) + "]");
  return t->f32_span(scratch);
}

}  // namespace

kernels::EdgeList edges_from_request(const InferRequest& in, std::optional<std::int64_t> num_nodes) {
  if (const Tensor* ei = in.find("edge_index")) {
    if (in.find("indptr") || in.find("indices")) throw InputError("inputs", "give edge_index or indptr/indices, not both");
    std::vector<std::int64_t> idx_scratch;
    const std::span<const std::int64_t> idx = ei->i64_span(idx_scratch);
    std::vector<float> w_scratch;
    std::optional<std::span<const float>> ws;
    if (in.find("edge_weight")) {
      if (ei->shape.size() != 2) throw InputError("input 'edge_index'", "must have shape [2, E]");
      ws = optional_f32(in, "edge_weight", ei->shape[1], w_scratch);
    }
    return kernels::edge_index_to_edge_list(idx, ei->shape, num_nodes, ws);
  }
  if (in.find("indptr") || in.find("indices")) {
    const Tensor& ip = need(in, "indptr");
    const Tensor& ix = need(in, "indices");
    if (ip.shape.size() != 1) throw InputError("input 'indptr'", "must have rank 1");
    if (ix.shape.size() != 1) throw InputError("input 'indices'", "must have rank 1");
    const std::int64_t n = num_nodes ? *num_nodes : ip.shape[0] - 1;
    std::vector<float> v_scratch;
    const std::optional<std::span<const float>> vs = optional_f32(in, "values", ix.shape[0], v_scratch);
    std::vector<std::int64_t> ip_scratch, ix_scratch;
    return kernels::csr_input_to_edge_list(ip.i64_span(ip_scratch), ix.i64_span(ix_scratch), n, vs);
  }
  throw InputError("inputs", "a graph needs edge_index [2, E] or indptr + indices");
}

namespace {

void check_input_names(const InferRequest& in) {
  for (const Tensor& t : in.inputs) {
    static const char* known[] = {"x", "edge_index", "edge_weight", "indptr", "indices", "values", "window", "node_ids"};
    bool ok = false;
    for (const char* k : known) ok = ok || t.name == k;
    if (!ok) throw InputError("input '" + t.name + "'", "not an input of this model");
  }
}

// input node_ids INT64 [m]: the rows to answer with, in their order, each in [0, nodes).
std::vector<std::int64_t> node_ids_of(const InferRequest& in, std::int64_t nodes) {
  const Tensor* t = in.find("node_ids");
  if (!t) return {};
  if (t->shape.size() != 1) throw InputError("input 'node_ids'", "must have rank 1 [m]");
  if (t->shape[0] < 1) throw InputError("input 'node_ids'", "must name at least one node");
  std::vector<std::int64_t> scratch;
  const std::span<const std::int64_t> ids = t->i64_span(scratch);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= nodes)
      throw InputError("input 'node_ids'[" + std::to_string(i) + "]",
                       "node " + std::to_string(ids[i]) + " out of range [0, " + std::to_string(nodes) + ")");
  return {ids.begin(), ids.end()};
}

std::optional<std::uint64_t> graph_version_of(const InferRequest& in) {
  const std::optional<std::int64_t> v = in.int_parameter("graph_version");
  if (!v) return std::nullopt;
  if (*v < 0) throw InputError("parameters.graph_version", "is " + std::to_string(*v) + ", must be >= 0");
  if (!in.string_parameter("graph_id"))
    throw InputError("parameters.graph_version", "names a version of a registered graph: give parameters.graph_id too");
  return static_cast<std::uint64_t>(*v);
}

void check_no_graph_tensors(const InferRequest& in) {
  if (in.find("edge_index") || in.find("indptr")) throw InputError("parameters.graph_id", "given together with graph tensors");
}

}  // namespace

Request build_request(const Model& model, const InferRequest& in, GraphRegistry& graphs) {
  check_input_names(in);
  if (!model.is_gnn()) {
    if (in.find("node_ids")) throw InputError("input 'node_ids'", "not an input of this model (a transformer has no nodes)");
    const Tensor& xt = need(in, "x");
    std::optional<std::int64_t> window = in.int_parameter("window");
    if (const Tensor* w = in.find("window")) {
      if (window) throw InputError("window", "given both as parameter and input");
      if (w->elements() != 1) throw InputError("input 'window'", "must hold one integer");
      window = w->i64()[0];
    }
    if (!window && model.spec().window >= 0) window = model.spec().window;  // the config's default
    if (!window) throw InputError("parameters.window", "missing (the attention window: token i sees j with |i - j| <= window / 2)");
    if (*window < 0) throw InputError("parameters.window", "is " + std::to_string(*window) + ", must be >= 0");
    const std::int64_t d_model = model.spec().d_model;
    std::optional<MappedFeatures> mapped = features_in_place(xt, d_model, "d_model", in);
    Request r = xt.device
                    ? Request::transformer(features_on_device(xt, d_model, "d_model"), *window)
                : mapped ? Request::transformer(std::move(*mapped), *window)
                         : Request::transformer(features(xt, d_model, "d_model"), *window);
    validate_request(model, r);
    return r;
  }
  const std::optional<std::string> id = in.string_parameter("graph_id");
  const std::optional<std::uint64_t> version = graph_version_of(in);
  Request r;
  if (id && !in.find("x")) {  // the graph's stored features, at one version
    check_no_graph_tensors(in);
    if (in.find("node_ids")) {  // only the rows asked for: the work they need, not the whole graph's
      const std::vector<std::int64_t> rows = node_ids_of(in, graphs.num_nodes(*id));
      GraphRegistry::Stored s = graphs.stored_rows(*id, model, version, rows);
      r = Request::gnn(std::move(s.graph), std::move(s.x));
      validate_request(model, r);
      r.set_rows_wanted(std::move(s.rows_wanted));
      return r;
    }
    GraphRegistry::Stored s = graphs.stored(*id, model, version);
    r = Request::gnn(std::move(s.graph), std::move(s.x));
  } else {
    const Tensor& xt = need(in, "x");
    const std::int64_t f = model.spec().in_features;
    std::optional<DeviceFeatures> on_gpu;
    std::optional<MappedFeatures> mapped;
    HostTensor x;
    if (xt.device) {
      on_gpu = features_on_device(xt, f, "in_features");
    } else if (!(mapped = features_in_place(xt, f, "in_features", in))) {
      x = features(xt, f, "in_features");
    }
    const std::int64_t rows = on_gpu ? on_gpu->rows : mapped ? mapped->rows : x.rows;
    std::shared_ptr<const Graph> g;
    if (id) {
      check_no_graph_tensors(in);
      const std::int64_t n = graphs.num_nodes(*id);
      if (n != rows)
        throw InputError("input 'x'", "has " + std::to_string(rows) + " rows, graph '" + *id +
                                          "' has " + std::to_string(n) + " nodes");
      g = graphs.graph_for(*id, model, version);
    } else {
      // x fixes the node count: an edge id >= rows is out of range, not a bigger graph.
      g = normalise_for(edges_from_request(in, rows), model);
    }
    r = on_gpu   ? Request::gnn(std::move(g), std::move(*on_gpu))
        : mapped ? Request::gnn(std::move(g), std::move(*mapped))
                 : Request::gnn(std::move(g), std::move(x));
  }
  validate_request(model, r);
  r.set_rows_wanted(node_ids_of(in, r.graph()->nodes));
  return r;
}

namespace {
// The outputs an inference asks for (every output the model serves when it names none).
std::vector<std::string> requested_outputs(const ModelInfo& info, const InferRequest& in) {
  std::vector<std::string> names;
  for (const RequestedOutput& o : in.outputs) {
    bool served = false;
    for (const TensorSpec& t : info.outputs) served = served || t.name == o.name;
    if (!served) {
      std::string list;
      for (const TensorSpec& t : info.outputs) list += (list.empty() ? "" : ", ") + t.name;
      throw InputError("outputs", "model '" + info.name + "' has no output '" + o.name + "' (its outputs: " + list + ")");
    }
    names.push_back(o.name);
  }
  if (names.empty())
    for (const TensorSpec& t : info.outputs) names.push_back(t.name);
  return names;
}
}  // namespace

Request prepare_infer(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                      const InferRequest& in, std::vector<std::string>* outputs,
                      std::shared_ptr<const CancelToken> cancel) {
  const ModelInfo info = service.model(model);
  std::vector<std::string> names = requested_outputs(info, in);
  if (outputs) *outputs = std::move(names);
  Request request = build_request(*info.model, in, graphs);
  check_inputs_read(in);
  request.set_cancel(std::move(cancel));
  // The answer alone, whole, asked for in a region: the engine's download writes it there.
  if (in.outputs.size() == 1 && in.outputs[0].name == "y" && in.outputs[0].sink &&
      request.rows_wanted().empty()) {
    const auto bytes =
        static_cast<std::size_t>(request.rows() * info.model->output_cols()) * sizeof(float);
    if (auto memory = in.outputs[0].sink->memory_for(bytes))
      request.set_answer_memory(std::move(memory));
  }
  return request;
}

std::optional<HostTensor> answer_from_graph(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                                            const InferRequest& in, std::vector<std::string>* outputs,
                                            std::int64_t* version) {
  const std::optional<std::string> id = in.string_parameter("graph_id");
  if (!id || in.find("x")) return std::nullopt;
  const ModelInfo info = service.model(model);
  if (!info.model->is_gnn()) return std::nullopt;
  check_input_names(in);
  check_no_graph_tensors(in);
  std::vector<std::string> names = requested_outputs(info, in);
  const std::vector<std::int64_t> rows = node_ids_of(in, graphs.num_nodes(*id));
  std::optional<HostTensor> y = graphs.answer_kept(*id, info.name, info.model, rows, graph_version_of(in), nullptr,
                                                   service.incremental_pricer(model));
  if (!y) return std::nullopt;
  if (outputs) *outputs = std::move(names);
  if (version) *version = info.version;
  return y;
}

std::future<HostTensor> submit_infer(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                                     const InferRequest& in, std::chrono::steady_clock::time_point* submitted,
                                     std::int64_t* version, std::vector<std::string>* outputs,
                                     std::shared_ptr<const CancelToken> cancel) {
  if (std::optional<HostTensor> kept = answer_from_graph(service, graphs, model, in, outputs, version)) {
    if (submitted) *submitted = std::chrono::steady_clock::now();
    std::promise<HostTensor> answered;
    answered.set_value(std::move(*kept));
    return answered.get_future();
  }
  Request request = prepare_infer(service, graphs, model, in, outputs, std::move(cancel));
  if (submitted) *submitted = std::chrono::steady_clock::now();
  return service.infer(model, std::move(request), version);
}

std::shared_ptr<const CancelToken> cancel_token(std::optional<std::chrono::steady_clock::time_point> deadline,
                                                std::shared_ptr<const CancelToken> parent) {
  if (!deadline && !parent) return nullptr;
  auto t = std::make_shared<CancelToken>();
  if (deadline) t->deadline = *deadline;
  t->parent = std::move(parent);
  return t;
}

std::vector<Tensor> output_tensors(const HostTensor& y, const std::vector<std::string>& names, bool view) {
  std::vector<Tensor> out;
  for (const std::string& name : names) {
    if (name == "predictions") {
      std::vector<std::int64_t> best(static_cast<std::size_t>(y.rows), 0);
      for (std::int64_t r = 0; r < y.rows; ++r) {
        const float* row = y.data.data() + r * y.cols;
        best[static_cast<std::size_t>(r)] = std::max_element(row, row + y.cols) - row;
      }
      out.push_back(Tensor::from_i64("predictions", {y.rows}, best));
    } else if (view) {
      out.push_back(Tensor{"y", "FP32", {y.rows, y.cols}, {},
                           std::string_view(reinterpret_cast<const char*>(y.data.data()), y.data.size() * sizeof(float)),
                           std::nullopt});
    } else {
      out.push_back(Tensor::from_f32("y", {y.rows, y.cols}, y.data));
    }
  }
  return out;
}

std::optional<std::chrono::microseconds> request_timeout(const InferRequest& in) {
  const std::optional<std::int64_t> us = in.int_parameter("timeout");
  if (!us) return std::nullopt;
  if (*us < 1 || *us > 3'600'000'000)
    throw InputError("parameters.timeout", std::to_string(*us) + " is not a wait in microseconds from 1 to 3600000000");
  return std::chrono::microseconds(*us);
}

HostTensor await_answer(std::future<HostTensor>& y, std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (deadline && y.wait_until(*deadline) != std::future_status::ready)
    throw DeadlineExceeded("deadline passed before the answer (parameters.timeout or the client's deadline); the "
                           "engine stops running the request at its next stage");
  return y.get();
}

std::vector<Tensor> run_infer(InferenceService& service, GraphRegistry& graphs, const std::string& model,
                              const InferRequest& in, double* engine_seconds, std::int64_t* version,
                              std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (const auto timeout = request_timeout(in)) {
    const auto own = std::chrono::steady_clock::now() + *timeout;
    deadline = deadline ? std::min(*deadline, own) : own;
  }
  std::chrono::steady_clock::time_point t0;
  std::vector<std::string> names;
  std::future<HostTensor> answer = submit_infer(service, graphs, model, in, &t0, version, &names, cancel_token(deadline));
  HostTensor y = await_answer(answer, deadline);
  if (engine_seconds) *engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Viewed first, so an output bound for shared memory is copied once, into its region; the rest
  // then take their bytes, as y goes with this call.
  std::vector<Tensor> outputs = output_tensors(y, names, /*view=*/true);
  deliver_outputs(outputs, in.outputs);
  for (Tensor& t : outputs)
    if (t.view && !t.shared_memory) {
      t.raw.assign(*t.view);
      t.view.reset();
    }
  return outputs;
}

namespace {
// Memory of the transport's own that a request holds: nothing can shrink it.
struct HeldBuffer final : HeldMemory {
  explicit HeldBuffer(std::shared_ptr<const void> o) : owner(std::move(o)) {}
  std::shared_ptr<const void> owner;
  void check_read(const std::string& /*where*/) const override {}
};
}  // namespace

void hold_views(InferRequest& request, std::string_view buffer, std::shared_ptr<const void> owner) {
  if (!owner || buffer.empty()) return;
  std::shared_ptr<const HeldBuffer> held;
  const char* lo = buffer.data();
  const char* hi = lo + buffer.size();
  for (const Tensor& t : request.inputs) {
    if (!t.view || t.view->empty() || t.view->data() < lo || t.view->data() + t.view->size() > hi)
      continue;
    if (!held) held = std::make_shared<const HeldBuffer>(owner);
    request.held.emplace_back("inputs['" + t.name + "']", held);
  }
}

void check_inputs_read(const InferRequest& request) {
  for (const auto& [where, held] : request.held) held->check_read(where);
}

void deliver_outputs(std::vector<Tensor>& outputs, const std::vector<RequestedOutput>& requested) {
  for (Tensor& t : outputs) {
    for (std::size_t i = 0; i < requested.size(); ++i) {
      const RequestedOutput& o = requested[i];
      if (o.name != t.name || !o.sink) continue;
      o.sink->write(t.bytes(), "outputs[" + std::to_string(i) + "]");
      SharedMemoryRef ref = *o.shared_memory;
      // Written in place by the engine, the answer here is its shape only.
      ref.byte_size = o.sink->written_in_place()
                          ? static_cast<std::uint64_t>(t.elements()) * sizeof(float)
                          : t.bytes().size();
      t.shared_memory = std::move(ref);
      t.raw.clear();
      t.view = std::string_view();
    }
  }
}

}  // namespace dype::rt::daemon
