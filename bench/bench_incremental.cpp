// Incremental inference against the whole-graph forward it replaces, in one process: a GCN
// (default 128 -> 128 -> 16, seeded) over a real graph (Matrix Market; bench/run_streaming_graph.sh
// writes Debian's package dependency graph), its activations kept (IncrementalGnn), then
//   whole        reference_forward over the whole graph (the CPU kernels a request runs): median
//   one edge     one random edge added, the answer rows it changed gathered: median
//   batched      BATCH single-edge updates applied one after another, each followed by its answer
//                rows: updates/s
// Every figure is measured on this machine's CPU. The answer after the run is checked against a
// whole forward over the final graph (relative error printed; the bench fails past 1e-5).
//
//   bench_incremental --graph /tmp/dype-debian-deps.mtx [--reps 5] [--updates 300] [--batch 2000]
//                     [--family gcn|gin|sage] [--threads 2]
// Prints RESULT lines (bench/run_all.sh): whole/one-edge speedup (target >= 50) and updates/s
// (target >= 5000).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "graph/generators.h"
#include "graph/mtx_reader.h"
#include "runtime/host_memory.h"
#include "runtime/incremental/dynamic_graph.h"
#include "runtime/incremental/incremental_gnn.h"
#include "runtime/model.h"

using namespace dype;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  rt::retain_freed_host_memory();
  std::string graph, family = "gcn";
  int reps = 5, updates = 300, batch = 2000, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--graph") graph = v;
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--updates") updates = std::atoi(v.c_str());
    else if (a == "--batch") batch = std::atoi(v.c_str());
    else if (a == "--family") family = v;
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "bench_incremental: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (graph.empty()) {
    std::fprintf(stderr, "usage: bench_incremental --graph G.mtx [--reps N] [--updates N] [--batch N] [--family F]\n");
    return 2;
  }
  tbb::global_control threads_limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  const kernels::EdgeList edges = kernels::read_mtx(graph);
  const std::int64_t n = edges.num_nodes;
  rt::ModelSpec spec{.layers = 2, .in_features = 128, .hidden = 128, .out_features = 16, .seed = 7};
  spec.family = family == "gin" ? rt::ModelFamily::gin : family == "sage" ? rt::ModelFamily::sage : rt::ModelFamily::gcn;
  const auto model = std::make_shared<const rt::Model>(rt::Model::make(spec));
  rt::DynamicGraph g(edges, rt::make_tensor(n, 128, kernels::generate_features(n, 128, 3)));
  std::printf("== incremental %s 128 -> 128 -> 16 on %s: %lld nodes, %lld edges, %d threads\n", family.c_str(),
              graph.c_str(), static_cast<long long>(n), static_cast<long long>(g.num_edges()), threads);

  // The whole forward on the graph normalised once (as a registered graph is), median of reps.
  std::vector<double> whole;
  const auto normalised = rt::graph_for_model(g.edge_list(), spec);
  for (int r = 0; r < reps; ++r) {
    const auto t = Clock::now();
    rt::HostTensor y = rt::reference_forward(*model, rt::Request::gnn(normalised, g.features()));
    whole.push_back(ms_since(t));
  }
  auto t0 = Clock::now();
  rt::IncrementalGnn gnn(model, g);
  const double build_ms = ms_since(t0);

  std::mt19937_64 rng(1);
  auto random_edge = [&](rt::GraphUpdate& u) {
    u.add_src.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)));
    u.add_dst.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)));
  };
  std::vector<double> one;
  std::vector<double> rows1, rows0;
  for (int i = 0; i < updates; ++i) {
    rt::GraphUpdate u;
    random_edge(u);
    const auto t = Clock::now();
    const rt::IncrementalStats s = gnn.update(g, g.apply(u));
    std::vector<std::int64_t> ids(s.changed.begin(), s.changed.end());
    const rt::HostTensor answer = gnn.rows(ids);
    one.push_back(ms_since(t));
    rows0.push_back(static_cast<double>(s.rows.front()));
    rows1.push_back(static_cast<double>(s.rows.back()));
  }
  t0 = Clock::now();
  std::size_t answered = 0;
  for (int i = 0; i < batch; ++i) {
    rt::GraphUpdate u;
    random_edge(u);
    const rt::IncrementalStats s = gnn.update(g, g.apply(u));
    std::vector<std::int64_t> ids(s.changed.begin(), s.changed.end());
    answered += static_cast<std::size_t>(gnn.rows(ids).rows);
  }
  const double batch_s = ms_since(t0) / 1000.0;
  const double err = rt::relative_error(
      gnn.output(), rt::reference_forward(*model, rt::Request::gnn(rt::graph_for_model(g.edge_list(), spec), g.features())));

  const double w = median(whole), o = median(one), ups = batch / batch_s;
  std::printf("whole-graph forward   %9.3f ms (median of %d)\n", w, reps);
  std::printf("activations built     %9.3f ms, %.1f MiB kept\n", build_ms, static_cast<double>(gnn.bytes()) / (1 << 20));
  std::printf("one edge + answer     %9.3f ms (median of %d; rows recomputed: layer 0 median %.0f, last layer median %.0f)\n",
              o, updates, median(rows0), median(rows1));
  std::printf("batched single edges  %9.0f updates/s (%d updates, %zu answer rows)\n", ups, batch, answered);
  std::printf("answer vs whole forward after %d updates: relative error %.3g\n", updates + batch, err);
  std::printf(
      "RESULT name=incremental_one_edge_speedup value=%.4g unit=x kind=own_ratio better=higher "
      "peer=whole_graph_forward "
      "target=50\n",
      w / o);
  std::printf("RESULT name=incremental_updates_per_s value=%.4g unit=updates/s kind=absolute better=higher peer=none "
              "target=5000\n", ups);
  return err < 1e-5 ? 0 : 1;
}
