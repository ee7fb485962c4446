// Full-graph CPU inference of a model repository entry (trained-layout GCN, GIN or GraphSAGE) on a graph file:
// dype's single-device CPU path (graph normalised once, as at registration; then the chain of CPU
// kernels), medians of --reps runs, measured. Checks the answer against PyTorch's when given.
//
//   ./build/release/bench/bench_gnn_models --repo DIR --model NAME --graph G.mtx --features X.npy
//       [--expect Y.npy] [--reps 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/graph/mtx_reader.h"
#include "runtime/model.h"
#include "runtime/repository/model_repository.h"
#include "runtime/repository/npy.h"

using Clock = std::chrono::steady_clock;
using namespace dype;

int main(int argc, char** argv) {
  std::string repo, model, graph, features, expect;
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--repo") repo = v;
    else if (k == "--model") model = v;
    else if (k == "--graph") graph = v;
    else if (k == "--features") features = v;
    else if (k == "--expect") expect = v;
    else if (k == "--reps") reps = std::stoi(v);
    else {
      std::fprintf(stderr, "bench_gnn_models: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (repo.empty() || model.empty() || graph.empty() || features.empty()) {
    std::fprintf(stderr, "bench_gnn_models: needs --repo, --model, --graph and --features\n");
    return 2;
  }
  try {
    const rt::RepositoryModel m = rt::ModelRepository({repo}).load(model);
    const kernels::EdgeList edges = kernels::read_mtx(graph);
    auto g = rt::graph_for_model(edges, m.model->spec());
    const rt::NpyArray x = rt::read_npy(features);
    const rt::Request req = rt::Request::gnn(g, rt::make_tensor(x.shape[0], x.shape[1], x.data));
    rt::HostTensor y = rt::reference_forward(*m.model, req);  // warm-up
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      y = rt::reference_forward(*m.model, req);
      t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    double err = -1.0;
    if (!expect.empty()) {
      const rt::NpyArray want = rt::read_npy(expect);
      err = rt::relative_error(y, rt::make_tensor(want.shape[0], want.shape[1], want.data));
    }
    std::printf("dype %s: median_ms=%.1f min_ms=%.1f nodes=%lld nnz=%lld rel_err_vs_torch=%.2e (measured)\n",
                model.c_str(), t[t.size() / 2], t.front(), static_cast<long long>(g->nodes),
                static_cast<long long>(g->nnz), err);
    return err > 1e-4 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gnn_models: %s\n", e.what());
    return 1;
  }
}
