#pragma once
// The workload the scheduler maps: an ordered chain of kernels built from a model config
// (configs/models/*.yaml) and the characteristics of the input (graph size, nnz, feature length,
// sequence length, window).
//
//   auto cfg = dype::sched::load_model_config(DYPE_SOURCE_DIR "/configs/models/gcn.yaml");
//   dype::sched::InputCharacteristics in{.nodes = 169343, .nnz = 1166243, .feature_len = 128};
//   dype::sched::Workload wl = dype::sched::build_workload(cfg, in);   // SpMM, GEMM, SpMM, GEMM
#include <cstdint>
#include <string>
#include <vector>

#include "common/op.h"

namespace dype::sched {

struct InputCharacteristics {
  std::int64_t nodes = 0;        // GNN: graph vertices
  std::int64_t nnz = 0;          // GNN: adjacency non-zeros (edges, with self loops if any)
  std::int64_t feature_len = 0;  // input feature length (transformer: 0 = d_model)
  std::int64_t seq_len = 0;      // transformer tokens
  std::int64_t window = 0;       // transformer sliding window
  double degree_skew = 0.0;      // max row nnz / mean row nnz, 0 = unknown
  kernels::GatherLocality locality{};  // SpMM miss-ratio curve of the graph; unknown for shapes only
};

struct Kernel {
  std::string name;  // "l0.spmm"
  int layer = 0;
  kernels::OpShape shape;
  double flops = 0.0;         // useful floating-point operations
  double input_bytes = 0.0;   // dynamic input (features / activations), FP32
  double output_bytes = 0.0;  // what the next kernel consumes, FP32
};

struct Workload {
  std::string model;
  std::vector<Kernel> kernels;
  int size() const { return static_cast<int>(kernels.size()); }
};

// One kernel template of a layer. `out` names a dim of the model (or is a number); "same" keeps
// the incoming width (SpMM, attention).
struct KernelTemplate {
  std::string name;
  kernels::OpKind op = kernels::OpKind::gemm;
  std::string out = "same";
  // spmm only: the aggregation also carries each node's own features ([mean of neighbours | self],
  // GraphSAGE): twice the rows of the sparse matrix (one more nonzero per node), twice the width out.
  bool with_self = false;
};

struct ModelConfig {
  std::string name;
  std::string family;  // "gnn" (rows = nodes) or "transformer" (rows = seq_len)
  int layers = 1;
  std::vector<std::pair<std::string, std::int64_t>> dims;  // hidden: 128, d_model: 512, ...
  std::int64_t heads = 1;                                  // attention heads (transformer)
  std::vector<KernelTemplate> layer;                       // kernels of one layer, in order
  std::string last_out;  // dim/number for the last GEMM of the last layer ("" = as templated)

  std::int64_t dim(const std::string& key, const std::string& where) const;
};

ModelConfig load_model_config(const std::string& path);
ModelConfig parse_model_config(const std::string& yaml_text, const std::string& source);

// Throws InputError when a characteristic the model needs is missing or out of range.
Workload build_workload(const ModelConfig& config, const InputCharacteristics& input);

}  // namespace dype::sched
