#include "infer.h"

#include <algorithm>
#include <memory>
#include <chrono>
#include <cmath>
#include <iostream>
#include <numeric>

#include "common/error.h"
#include "cuda_region.h"
#include "graph/generators.h"
#include "runtime/repository/npy.h"
#include "runtime/repository/safetensors.h"
#include "shm_region.h"
#include "workload.h"

namespace dype::client {

namespace {

using rt::daemon::Tensor;
constexpr std::int64_t kMaxPrintedRows = 64;

// [rows, cols] FP32 from a .npy or .safetensors file, checked against the model's width.
rt::NpyArray read_features(const std::string& path, int features) {
  rt::NpyArray a;
  if (path.size() > 12 && path.ends_with(".safetensors")) {
    const rt::SafetensorsFile f = rt::SafetensorsFile::open(path);
    const std::vector<std::string> names = f.names();
    const std::string name = f.contains("x") ? "x" : names.size() == 1 ? names.front() : "";
    if (name.empty()) throw InputError("--features " + path, "holds several tensors and none is named 'x'");
    a.shape = f.tensor(name).shape;
    a.data = f.to_f32(name);
  } else {
    a = rt::read_npy(path);
  }
  if (a.shape.size() != 2) throw InputError("--features " + path, "must be 2-D [rows, features], has " + std::to_string(a.shape.size()) + " dimensions");
  if (a.shape[1] != features) {
    throw InputError("--features " + path, "has " + std::to_string(a.shape[1]) + " features per row, the model takes " +
                                               std::to_string(features));
  }
  return a;
}

void print_top(const Tensor& y, int k) {
  const std::int64_t rows = y.shape[0], cols = y.shape[1];
  const std::vector<float> v = y.f32();
  k = static_cast<int>(std::min<std::int64_t>(k, cols));
  std::cout << "top " << k << " of " << cols << " per row (class:logit):\n";
  std::vector<std::int64_t> idx(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::iota(idx.begin(), idx.end(), 0);
    const float* row = v.data() + r * cols;
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](auto a, auto b) { return row[a] > row[b]; });
    std::cout << "  " << r << ":";
    for (int i = 0; i < k; ++i) std::cout << " " << idx[static_cast<std::size_t>(i)] << ":" << row[idx[static_cast<std::size_t>(i)]];
    std::cout << "\n";
  }
}

}  // namespace

int run_infer(Transport& t, const InferOptions& o) {
  const ModelInfo info = t.model_info(o.model);
  std::vector<Tensor> in;
  nlohmann::json params = nlohmann::json::object();
  std::int64_t rows = 0;
  if (info.transformer) {
    rows = o.seq_len;
    if (!o.features.empty()) {
      rt::NpyArray x = read_features(o.features, info.features);
      rows = x.shape[0];
      in.push_back(Tensor::from_f32("x", {rows, info.features}, x.data));
    } else {
      in.push_back(Tensor::from_f32("x", {rows, info.features}, kernels::generate_features(rows, info.features, o.seed)));
    }
    // No --window: the server uses the model's default (config.yaml's window; 16 for the built-in
    // transformer) and refuses, naming parameters.window, a model that has none.
    if (o.window >= 0) params["window"] = o.window;
  } else {
    const kernels::EdgeList el = !o.graph.empty() ? read_graph_file(o.graph) : kernels::generate_uniform(o.nodes, o.edges, o.seed);
    rows = el.num_nodes;
    if (!o.features.empty()) {
      rt::NpyArray x = read_features(o.features, info.features);
      if (x.shape[0] != rows) {
        throw InputError("--features " + o.features, "has " + std::to_string(x.shape[0]) + " rows, the graph " +
                                                         std::to_string(rows) + " nodes");
      }
      in.push_back(Tensor::from_f32("x", {rows, info.features}, x.data));
    } else {
      in.push_back(Tensor::from_f32("x", {rows, info.features}, kernels::generate_features(rows, info.features, o.seed)));
    }
    for (Tensor& g : graph_tensors(el)) in.push_back(std::move(g));
  }
  // --shm / --cuda-shm: x is written into a region of this client's (system shared memory, or GPU
  // memory registered by IPC handle) and y asked for into another, so neither travels through the
  // protocol; y is read back from its region. x is written before the clock starts and y read after
  // it stops (what a client whose tensors already live there skips).
  std::unique_ptr<NamedRegion> x_region, y_region;
  std::vector<rt::daemon::RequestedOutput> outputs;
  if (o.shm || o.cuda_shm) {
    const char* flag = o.cuda_shm ? "--cuda-shm" : "--shm";
    if (o.shm && o.cuda_shm) throw InputError("--cuda-shm", "and --shm cannot both carry x and y");
    if (info.out_columns <= 0)
      throw InputError(flag, "model '" + o.model + "' answers no output y to place in a region");
    const std::optional<int> device = o.cuda_shm ? std::optional<int>(o.cuda_device) : std::nullopt;
    const Tensor x = std::move(in.front());
    x_region = make_region(t, "x", x.bytes().size(), device);
    x_region->write(x.bytes().data(), x.bytes().size());
    in.front() = x_region->tensor("x", "FP32", x.shape);
    y_region = make_region(
        t, "y", static_cast<std::size_t>(rows) * info.out_columns * sizeof(float), device);
    outputs.push_back(y_region->output("y"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  rt::daemon::InferResponse r = t.infer(o.model, in, params, outputs);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (Tensor& out : r.outputs) {
    if (!out.shared_memory || !y_region) continue;
    out.raw.resize(out.shared_memory->byte_size);
    y_region->read(out.shared_memory->offset, out.raw.data(), out.raw.size());
  }
  const Tensor* y = nullptr;
  const Tensor* predictions = nullptr;
  for (const Tensor& t : r.outputs) {
    if (t.name == "predictions") predictions = &t;
    else if (!y) y = &t;
  }
  if (y) {
    double sum = 0.0, abs_sum = 0.0;
    for (float v : y->f32()) {
      sum += v;
      abs_sum += std::fabs(v);
    }
    std::cout << "model " << o.model << " output " << y->name << " shape [" << y->shape[0] << ", " << y->shape[1]
              << "] checksum sum=" << sum << " abs_sum=" << abs_sum << " latency " << ms << " ms (measured, "
              << o.protocol_name << ")\n";
    if (y->shape.size() == 2 && y->shape[0] <= kMaxPrintedRows && o.top_k > 0) print_top(*y, o.top_k);
  }
  if (predictions) {
    const std::vector<std::int64_t> classes = predictions->i64();
    std::cout << "model " << o.model << " output predictions (arg-max class per row), " << classes.size() << " rows";
    if (!y) std::cout << ", latency " << ms << " ms (measured, " << o.protocol_name << ")";
    std::cout << "\n";
    if (static_cast<std::int64_t>(classes.size()) <= kMaxPrintedRows) {
      std::cout << " ";
      for (std::int64_t c : classes) std::cout << " " << c;
      std::cout << "\n";
    }
  }
  if (!o.out.empty()) {
    if (!y) throw InputError("--out", "model '" + o.model + "' answers only predictions; --out writes the output y");
    const std::vector<float> v = y->f32();
    rt::write_npy(o.out, y->shape, v);
    std::cout << "wrote " << o.out << "\n";
  }
  return 0;
}

}  // namespace dype::client
