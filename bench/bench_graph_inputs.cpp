// Graph input throughput (measured, CPU): Matrix Market and SNAP parsing from a file on disk,
// edge_index validation, synthetic generators and characteristics.
//   ./bench_graph_inputs --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "graph/characteristics.h"
#include "graph/edge_index.h"
#include "graph/generators.h"
#include "graph/mtx_reader.h"
#include "graph/snap_reader.h"
#include "runtime/model.h"

namespace {
using namespace dype::kernels;

// Writes a graph as .mtx (real general) or SNAP text once per size; fprintf is fine here, only
// the reading is timed.
std::filesystem::path write_file(std::int64_t entries, bool mtx) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("dype_bench_" + std::to_string(::getpid()) + "_" + std::to_string(entries) +
                     (mtx ? ".mtx" : ".txt"));
  if (std::filesystem::exists(path)) return path;
  const std::int64_t nodes = std::max<std::int64_t>(1000, entries / 16);
  const EdgeList g = generate_rmat(nodes, entries, 1);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (mtx) {
    std::fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%lld %lld %lld\n",
                 static_cast<long long>(nodes), static_cast<long long>(nodes),
                 static_cast<long long>(entries));
  } else {
    std::fprintf(f, "# FromNodeId\tToNodeId\n");
  }
  for (std::int64_t e = 0; e < entries; ++e) {
    if (mtx) {
      std::fprintf(f, "%lld %lld %.6g\n", static_cast<long long>(g.src[e] + 1),
                   static_cast<long long>(g.dst[e] + 1), 0.001 * static_cast<double>(e % 997));
    } else {
      std::fprintf(f, "%lld\t%lld\n", static_cast<long long>(g.src[e]) * 3,
                   static_cast<long long>(g.dst[e]) * 3);
    }
  }
  std::fclose(f);
  return path;
}

void BM_ReadMtx(benchmark::State& state) {
  const auto path = write_file(state.range(0), true);
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
  for (auto _ : state) benchmark::DoNotOptimize(read_mtx(path).num_edges());
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * bytes);
  std::filesystem::remove(path);
}
BENCHMARK(BM_ReadMtx)->Arg(1 << 20)->Arg(10 << 20)->Unit(benchmark::kMillisecond);

void BM_ReadSnapRemap(benchmark::State& state) {
  const auto path = write_file(state.range(0), false);
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
  for (auto _ : state) benchmark::DoNotOptimize(read_snap(path).edges.num_edges());
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * bytes);
  std::filesystem::remove(path);
}
BENCHMARK(BM_ReadSnapRemap)->Arg(10 << 20)->Unit(benchmark::kMillisecond);

void BM_ValidateEdgeIndex(benchmark::State& state) {
  const EdgeList g = generate_uniform(1 << 20, state.range(0), 2, {true, false});
  std::vector<std::int64_t> flat(g.src);
  flat.insert(flat.end(), g.dst.begin(), g.dst.end());
  const std::int64_t shape[2] = {2, state.range(0)};
  for (auto _ : state) benchmark::DoNotOptimize(validate_edge_index(flat, shape, 1 << 20));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ValidateEdgeIndex)->Arg(10 << 20)->Unit(benchmark::kMillisecond);

void BM_GenerateUniformUnique(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(generate_uniform(1 << 20, state.range(0), 3).num_edges());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GenerateUniformUnique)->Arg(10 << 20)->Unit(benchmark::kMillisecond);

void BM_GenerateRmat(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(generate_rmat(1 << 20, state.range(0), 4).num_edges());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GenerateRmat)->Arg(10 << 20)->Unit(benchmark::kMillisecond);

void BM_Characterize(benchmark::State& state) {
  const EdgeList g = generate_rmat(1 << 20, state.range(0), 5);
  for (auto _ : state) benchmark::DoNotOptimize(characterize(g).degree_gini);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Characterize)->Arg(10 << 20)->Unit(benchmark::kMillisecond);

// What a daemon request that carries its graph pays to build the engine's CSR (GCN normalisation:
// self loops, merged duplicates, D^-1/2 (A + I) D^-1/2), at the size bench_daemon_http sends.
void BM_GraphFromEdgesGcn(benchmark::State& state) {
  const EdgeList g = dype::rt::random_graph(state.range(0), state.range(1), 6);
  for (auto _ : state) benchmark::DoNotOptimize(dype::rt::Graph::from_edges(g, true)->nnz);
  state.SetItemsProcessed(state.iterations() * state.range(1));
}
BENCHMARK(BM_GraphFromEdgesGcn)->Args({1000, 10000})->Args({100000, 1000000})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
