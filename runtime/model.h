#pragma once
// Models as executable kernel chains: GCN, GIN and the sliding-window transformer of the DyPe paper,
// with seeded weights, the kernel list the scheduler plans over (one entry per planned kernel, in
// the order of configs/models/*.yaml), and a single-device CPU reference forward pass that calls
// the kernels directly (the ground truth every pipeline is checked against).
//
//   rt::Model gcn = rt::Model::gcn({.layers = 2, .in_features = 32, .hidden = 16, .seed = 1});
//   auto graph = rt::Graph::from_edges(rt::random_graph(500, 4000, 7), /*gcn_norm=*/true);
//   rt::Request req = rt::Request::gnn(graph, kernels::generate_features(500, 32, 3));
//   rt::HostTensor y = rt::reference_forward(gcn, req);          // [500 x 16]
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "common/error.h"
#include "graph/edge_list.h"
#include "common/op.h"
#include "scheduler/workload.h"

namespace dype::hw {
class DeviceIpcMemory;
}

namespace dype::rt {

// Row-major FP32 [rows x cols] on the host. size_only: shape without storage (timing-only runs of
// paper-scale inputs on emulated devices, where no arithmetic happens).
struct HostTensor {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> data;
  bool size_only = false;

  static HostTensor zeros(std::int64_t rows, std::int64_t cols);
  static HostTensor shape_only(std::int64_t rows, std::int64_t cols);
  std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * sizeof(float); }
};

// A graph as the runtime holds it: CSR (int32) adjacency, normalised as the model wants it.
// Shape-only graphs keep indptr (for nnz-balanced partitioning) but no indices/values.
struct Graph {
  std::uint64_t id = 0;  // process-unique, keys device-side caches
  std::int64_t nodes = 0;
  std::int64_t nnz = 0;
  std::vector<std::int32_t> indptr;
  std::vector<std::int32_t> indices;
  std::vector<float> values;
  double degree_skew = 1.0;  // max row nnz / mean row nnz
  // How SpMM's gathers reuse X's rows (unknown for shape-only graphs): the CPU models price it.
  kernels::GatherLocality locality{};
  // CSR rows per node: 1 for A (nodes x nodes); 2 for GraphSAGE's interleaved [A_mean ; I] (row
  // 2i: node i's mean over its in-neighbours, row 2i + 1: node i itself), so one SpMM yields
  // [A_mean x | x] as an N x 2F matrix in row-major order.
  std::int32_t rows_per_node = 1;
  std::int64_t csr_rows() const { return nodes * rows_per_node; }
  bool size_only() const { return indices.empty() && nnz > 0; }

  // gcn_norm: add self loops, weight D^-1/2 (A + I) D^-1/2 (Kipf & Welling) as PyG's gcn_norm does
  // (a node's own loop edges become one loop; duplicate edges add). Otherwise the plain adjacency
  // plus (1 + eps) on the diagonal (GIN's (1 + eps) x_i + sum_j x_j), eps = gin_eps.
  static std::shared_ptr<const Graph> from_edges(const kernels::EdgeList& edges, bool gcn_norm,
                                                 float gin_eps = 0.0f);
  // GraphSAGE with mean aggregation (PyG's SAGEConv): the interleaved (2N x N) matrix above, each
  // edge counting once (SAGEConv takes no edge weights), a node without in-neighbours all zero.
  static std::shared_ptr<const Graph> sage_mean(const kernels::EdgeList& edges);
  // The block-diagonal union of normalised graphs (PyG's batching of graphs): part i's nodes come
  // after those of parts 0..i-1 and no edge crosses parts, so a GNN's node outputs over it are the
  // parts' own outputs stacked. Every part must have the same rows_per_node and indices; InputError
  // when the union has 2^31 entries or more.
  static std::shared_ptr<const Graph> block_diagonal(const std::vector<std::shared_ptr<const Graph>>& parts);
  // Degrees only (timing-only): `nodes` rows, `nnz` entries; skew > 1 makes every 64th row heavy.
  static std::shared_ptr<const Graph> shape_only(std::int64_t nodes, std::int64_t nnz,
                                                 double skew = 1.0);
  // A process-unique id for a graph built elsewhere (one that arrived from another host).
  static std::uint64_t fresh_id();
};

// Seeded uniform random edges (deterministic for tests and examples).
kernels::EdgeList random_graph(std::int64_t nodes, std::int64_t edges, std::uint64_t seed);

enum class ModelFamily { gcn, gin, sage, transformer };
const char* to_string(ModelFamily f);

// The activation between GNN layers and inside a transformer's feed-forward block.
enum class Nonlinearity { relu, gelu };
const char* to_string(Nonlinearity a);

struct ModelSpec {
  ModelFamily family = ModelFamily::gcn;
  int layers = 2;
  // GNN
  std::int64_t in_features = 64;
  std::int64_t hidden = 128;
  std::int64_t out_features = 0;  // the last layer's width (classes); 0: hidden
  float gin_eps = 0.0f;
  Nonlinearity activation = Nonlinearity::relu;
  // What an answer carries: the last layer's values ("y", the logits) and/or the arg-max class of
  // each row ("predictions"). Serving only; the kernel chain is the same.
  bool output_logits = true;
  bool output_predictions = false;
  // transformer
  std::int64_t d_model = 512;
  std::int64_t heads = 8;
  std::int64_t ffn = 2048;
  // false: the paper's bare block (QKV, attention, out_proj, two FFN GEMMs: timing-only chains);
  // true: PyTorch's nn.TransformerEncoderLayer, with skip connections and LayerNorm.
  bool residual_norm = false;
  bool norm_first = false;  // residual_norm: pre-norm (LayerNorm before attention and FFN)
  float layer_norm_eps = 1e-5f;
  std::int64_t window = -1;  // the window a request that names none gets; -1: requests must name it
  std::uint64_t seed = 1;
  // false: only shapes, no weight values (timing-only, paper-scale)
  bool materialize_weights = true;

  std::int64_t out_width() const { return out_features > 0 ? out_features : hidden; }
};

// The runtime graph a model of this family wants for these edges: GCN's normalised A + I, GIN's
// A + (1 + eps) I, SAGE's interleaved mean matrix.
std::shared_ptr<const Graph> graph_for_model(const kernels::EdgeList& edges, const ModelSpec& spec);

// How a step treats a transformer block's skip connection. The block's input rides along as the
// activation's last tensor (carry_cols wide) from the step that saves it, through the steps that
// pass it on, to the GEMM that adds it in its epilogue (Epilogue::bias_residual).
enum class Residual : std::uint8_t { none, save, pass, add };

// One planned kernel. The transformer's QKV kernel runs as three GEMM launches (Q, K, V land in
// separate tensors, the layout window attention reads).
struct Step {
  std::string name;  // "l0.spmm"
  int layer = 0;
  kernels::OpKind op = kernels::OpKind::gemm;
  bool qkv = false;
  std::int64_t in_cols = 0;
  std::int64_t out_cols = 0;
  kernels::cpu::Epilogue epilogue = kernels::cpu::Epilogue::none;
  std::vector<int> weights;  // indices into Model::weights (W, bias per GEMM; 3 x (W, bias) for
                             // qkv; gamma, beta for a layer norm)
  Residual residual = Residual::none;
  std::int64_t carry_cols = 0;  // width of the carried skip tensor (residual != none)

  int launches() const { return qkv ? 3 : 1; }
  bool carries_in() const { return residual == Residual::pass || residual == Residual::add; }
  bool carries_out() const { return residual == Residual::save || residual == Residual::pass; }
  // Tensors read and handed on, the carried skip tensor (last) included.
  int inputs() const { return (op == kernels::OpKind::window_attention ? 3 : 1) + (carries_in() ? 1 : 0); }
  int outputs() const { return launches() + (carries_out() ? 1 : 0); }
  std::int64_t output_cols(int i) const { return i < launches() ? out_cols : carry_cols; }
};

// What a request looks like to performance models, the drift detector and the scheduler: the
// scheduler's own type (scheduler/workload.h), so plans are asked for without a copy by hand.
using Characteristics = sched::InputCharacteristics;

class Request;

class Model {
 public:
  static Model gcn(ModelSpec spec);
  static Model gin(ModelSpec spec);
  static Model sage(ModelSpec spec);
  static Model transformer(ModelSpec spec);
  static Model make(ModelSpec spec);

  const ModelSpec& spec() const { return spec_; }
  ModelFamily family() const { return spec_.family; }
  bool is_gnn() const { return spec_.family != ModelFamily::transformer; }
  int num_kernels() const { return static_cast<int>(steps_.size()); }
  const Step& step(int i) const { return steps_.at(i); }
  const std::vector<Step>& steps() const { return steps_; }
  const HostTensor& weight(int i) const { return weights_.at(i); }
  int num_weights() const { return static_cast<int>(weights_.size()); }
  // Replaces weight i with trained values of the same shape (InputError naming `what` otherwise).
  void set_weight(int i, HostTensor values, const std::string& what);
  std::int64_t output_cols() const { return steps_.back().out_cols; }

  // OpShapes of every kernel for a request with these characteristics (whole, one device).
  std::vector<kernels::OpShape> kernel_shapes(const Characteristics& c) const;
  // FP32 bytes kernel k hands on (all of its outputs).
  double output_bytes(int k, const Characteristics& c) const;

 private:
  explicit Model(ModelSpec spec) : spec_(spec) {}
  int add_weight(std::int64_t rows, std::int64_t cols, std::uint64_t stream, float scale, float center = 0.0f);
  ModelSpec spec_;
  std::vector<Step> steps_;
  std::vector<HostTensor> weights_;
};

// When a request stops being worth running: its client's deadline passed, or the client went away
// (a cancelled gRPC stream). The pipeline checks it before each stage and answers an expired
// request with RequestCancelled instead of running the rest of it, so an abandoned request frees
// its stages for the others.
struct CancelToken {
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::shared_ptr<const CancelToken> parent;  // e.g. the stream a request came on: expires it too
  bool expired() const {
    return cancelled.load(std::memory_order_relaxed) ||
           (deadline != std::chrono::steady_clock::time_point::max() && std::chrono::steady_clock::now() >= deadline) ||
           (parent && parent->expired());
  }
};

// The answer of a request whose CancelToken expired before it finished.
class RequestCancelled : public Error {
 public:
  using Error::Error;
};

// Features left in GPU memory another process shared with the daemon (the CUDA shared-memory
// extension): row-major FP32 [rows x cols] at `offset` bytes into `memory`, already checked finite.
struct DeviceFeatures {
  std::shared_ptr<const hw::DeviceIpcMemory> memory;
  std::size_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// Features read where a client mapped them into this process (a registered system shared-memory
// region), with no copy of the engine's own: row-major FP32 [rows x cols] at `data`, valid while
// `keep` is held, already checked finite. `intact()`, asked once they were read, says whether the
// memory stayed whole meanwhile (a client may shrink the object behind a region at any time).
struct MappedFeatures {
  std::shared_ptr<const void> keep;
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::function<bool()> intact;
};

// Memory a client mapped for the answer (a registered output region): the last stage's one
// download writes the whole answer there, row-major FP32, instead of into a tensor of its own, and
// the answer the engine returns is then shape-only. `bytes` is the room at `data`, or, for a
// region in GPU memory (`device`, data null), at `device_offset` in it: a stage on that very GPU
// copies its rows there device to device, any other stage through the host. `written` is set once
// the answer is there; `intact()`, asked after writing, says whether the memory stayed whole.
struct AnswerMemory {
  std::shared_ptr<const void> keep;
  float* data = nullptr;
  std::shared_ptr<const hw::DeviceIpcMemory> device;
  std::size_t device_offset = 0;
  std::size_t bytes = 0;
  std::function<bool()> intact;
  std::shared_ptr<std::atomic<bool>> written = std::make_shared<std::atomic<bool>>(false);
};

// One inference: GNN = a (registered) graph plus node features [nodes x in_features];
// transformer = token embeddings [seq_len x d_model] and the window.
class Request {
 public:
  static Request gnn(std::shared_ptr<const Graph> graph, HostTensor x);
  static Request transformer(HostTensor x, std::int64_t window);
  // x left where it is, in GPU memory: a first stage on that very GPU copies it in place
  // (TransferEngine::upload_input); anything else reads it to the host once, on first use.
  static Request gnn(std::shared_ptr<const Graph> graph, DeviceFeatures x);
  static Request transformer(DeviceFeatures x, std::int64_t window);
  // x read where the client mapped it: stages copy from there (TransferEngine::upload_input);
  // input() copies it once for anything that needs a tensor of its own.
  static Request gnn(std::shared_ptr<const Graph> graph, MappedFeatures x);
  static Request transformer(MappedFeatures x, std::int64_t window);

  const std::shared_ptr<const Graph>& graph() const { return graph_; }
  // x on the host. For device or mapped features: copied on the first call (thread-safe);
  // DeviceError / InputError when that fails (mapped memory that shrank meanwhile).
  const HostTensor& input() const;
  // Where x lies when it was left in GPU memory or read where it was mapped; null otherwise.
  const DeviceFeatures* device_input() const;
  const MappedFeatures* mapped_input() const;
  std::int64_t window() const { return window_; }
  std::int64_t rows() const { return x_.rows; }
  std::int64_t cols() const { return x_.cols; }
  Characteristics characteristics() const;
  // The rows of the answer wanted, in this order (a GNN's node_ids): the engine answers with those
  // rows only. Empty: every row.
  void set_rows_wanted(std::vector<std::int64_t> rows) { rows_wanted_ = std::move(rows); }
  const std::vector<std::int64_t>& rows_wanted() const { return rows_wanted_; }
  // Where the whole answer goes when the client mapped memory for it (not used with rows_wanted).
  void set_answer_memory(std::shared_ptr<const AnswerMemory> m) { answer_ = std::move(m); }
  const AnswerMemory* answer_memory() const {
    return rows_wanted_.empty() ? answer_.get() : nullptr;
  }
  // Ties the request to a token (none: it always runs to the end).
  void set_cancel(std::shared_ptr<const CancelToken> token) { cancel_ = std::move(token); }
  const CancelToken* cancel() const { return cancel_.get(); }

 private:
  struct External;  // device or mapped features and their host copy, made once
  // x_ the external features' shape, external_ holding them (InputError without their memory).
  void attach(std::optional<DeviceFeatures> device, std::optional<MappedFeatures> mapped);
  std::shared_ptr<const Graph> graph_;
  HostTensor x_;  // device or mapped features: the shape only, until input() copies them
  std::shared_ptr<External> external_;
  std::int64_t window_ = 0;
  std::vector<std::int64_t> rows_wanted_;
  std::shared_ptr<const CancelToken> cancel_;
  std::shared_ptr<const AnswerMemory> answer_;
};

// InputError naming input 'x' when mapped features' memory did not stay whole while read.
void check_mapped_intact(const MappedFeatures& x);

// Rows `rows` of y, in that order (InputError naming node_ids[i] when one is out of range).
HostTensor take_rows(const HostTensor& y, std::span<const std::int64_t> rows);

// Convenience: features as a tensor.
HostTensor make_tensor(std::int64_t rows, std::int64_t cols, std::vector<float> data);

// Checks the request fits the model (InputError naming the field otherwise).
void validate_request(const Model& model, const Request& request);

// The single-device CPU reference: every kernel called directly on host memory.
HostTensor reference_forward(const Model& model, const Request& request);

// max |a - b| / max(|b|_inf, tiny): the relative error the correctness tests bound.
double relative_error(const HostTensor& a, const HostTensor& b);

}  // namespace dype::rt
