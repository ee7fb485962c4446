// CPU inference of a model repository entry, whole input at once: a GCN, GIN or GraphSAGE on a
// graph file (graph normalised once, as at registration; then the chain of CPU kernels), or a
// transformer encoder on token embeddings with a window. dype's single-device CPU path, medians
// of --reps runs, measured. Checks the answer against PyTorch's when given.
//
//   ./build/release/bench/bench_model_inference --repo DIR --model NAME --graph G.mtx --features X.npy
//       [--expect Y.npy] [--reps 7]
//   ./build/release/bench/bench_model_inference --repo DIR --model NAME --tokens X.npy --window 256
//       [--expect Y.npy] [--reps 7]
#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "graph/mtx_reader.h"
#include "runtime/host_memory.h"
#include "runtime/model.h"
#include "runtime/repository/model_repository.h"
#include "runtime/repository/npy.h"

using Clock = std::chrono::steady_clock;
using namespace dype;

int main(int argc, char** argv) {
  dype::rt::retain_freed_host_memory();  // activations reuse heap pages (runtime/host_memory.h)
  std::string repo, model, graph, features, tokens, expect;
  int reps = 7;
  long long window = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--repo") repo = v;
    else if (k == "--model") model = v;
    else if (k == "--graph") graph = v;
    else if (k == "--features") features = v;
    else if (k == "--tokens") tokens = v;
    else if (k == "--window") window = std::stoll(v);
    else if (k == "--expect") expect = v;
    else if (k == "--reps") reps = std::stoi(v);
    else {
      std::fprintf(stderr, "bench_model_inference: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const bool gnn = !graph.empty();
  if (repo.empty() || model.empty() || (gnn ? features.empty() : tokens.empty() || window < 0)) {
    std::fprintf(stderr, "bench_model_inference: needs --repo, --model and either --graph with --features or "
                         "--tokens with --window\n");
    return 2;
  }
  try {
    const rt::RepositoryModel m = rt::ModelRepository({repo}).load(model);
    std::shared_ptr<const rt::Graph> g;
    rt::Request req;
    if (gnn) {
      const kernels::EdgeList edges = kernels::read_mtx(graph);
      g = rt::graph_for_model(edges, m.model->spec());
      const rt::NpyArray x = rt::read_npy(features);
      req = rt::Request::gnn(g, rt::make_tensor(x.shape[0], x.shape[1], x.data));
    } else {
      const rt::NpyArray x = rt::read_npy(tokens);
      req = rt::Request::transformer(rt::make_tensor(x.shape[0], x.shape[1], x.data), window);
    }
    rt::HostTensor y = rt::reference_forward(*m.model, req);  // warm-up
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      y = rt::reference_forward(*m.model, req);
      t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    // One copy of the input's bytes into a fresh buffer, as a server taking them off the wire does
    // (page faults included): the unit the serving-path targets are stated in.
    const std::vector<float>& xs = req.input().data;
    std::vector<double> copy_ms;
    for (int r = 0; r < std::max(reps, 5); ++r) {
      const auto t0 = Clock::now();
      std::vector<float> dst(xs.size());
      std::memcpy(dst.data(), xs.data(), xs.size() * sizeof(float));
      copy_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (dst[xs.size() / 2] != xs[xs.size() / 2]) return 1;  // keeps the copy
    }
    std::sort(copy_ms.begin(), copy_ms.end());
    double err = -1.0;
    if (!expect.empty()) {
      const rt::NpyArray want = rt::read_npy(expect);
      err = rt::relative_error(y, rt::make_tensor(want.shape[0], want.shape[1], want.data));
    }
    if (gnn) {
      std::printf("dype %s: median_ms=%.1f min_ms=%.1f nodes=%lld nnz=%lld rel_err_vs_torch=%.2e x_bytes=%zu "
                  "x_memcpy_ms=%.2f (measured)\n",
                  model.c_str(), t[t.size() / 2], t.front(), static_cast<long long>(g->nodes),
                  static_cast<long long>(g->nnz), err, xs.size() * sizeof(float), copy_ms[copy_ms.size() / 2]);
    } else {
      std::printf("dype %s: median_ms=%.1f min_ms=%.1f seq_len=%lld window=%lld rel_err_vs_torch=%.2e (measured)\n",
                  model.c_str(), t[t.size() / 2], t.front(), static_cast<long long>(req.rows()), window, err);
    }
    return err > 1e-4 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model_inference: %s\n", e.what());
    return 1;
  }
}
