// Scheduler speed: one full solve (cost tables + DP + explanation) per iteration, median of
// repeated runs. Targets: GCN on the paper system (4 kernels, 3 FPGAs + 2 GPUs) <= 50 us; the
// 32-layer sliding-window transformer (160 kernels, 3 + 2 devices) <= 20 ms; 64 kernels on 3 kinds
// x 8 devices <= 1 s; memory < 1 GiB (peak RSS reported as a counter). Cost figures come from the
// AdditiveCostModel (modelled); solve times are measured.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "scheduler/solver.h"

namespace {

using namespace dype::sched;

Workload gnn(const char* file, int layers) {
  ModelConfig cfg = load_model_config(std::string(DYPE_SOURCE_DIR) + "/configs/models/" + file);
  if (layers > 0) cfg.layers = layers;
  // ogbn-products (paper Table I): 2.4M nodes, 61M edges, feature length 100.
  return build_workload(cfg, {.nodes = 2449029, .nnz = 61859140, .feature_len = 100});
}

Workload transformer() {
  const ModelConfig cfg = load_model_config(std::string(DYPE_SOURCE_DIR) + "/configs/models/swin-transformer.yaml");
  return build_workload(cfg, {.seq_len = 8192, .window = 1024});
}

SystemSpec three_by_eight() {
  SystemSpec s = paper_testbed(true);
  for (auto& k : s.kinds) k.count = 8;
  return s;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

void run(benchmark::State& state, const SystemSpec& sys, const Workload& wl, Objective obj,
         SolverKind solver = SolverKind::exact) {
  const AdditiveCostModel model = AdditiveCostModel::from_gflops(sys, wl);
  Plan plan;
  for (auto _ : state) {
    plan = solve(sys, model, {.objective = obj}, solver);
    // On a copy: GBench 1.7's DoNotOptimize may round-trip a double lvalue through a general
    // register and corrupt it (the period counter printed 4.6e-304).
    double sink = plan.period_s;
    benchmark::DoNotOptimize(sink);
  }
  state.SetLabel(plan.mnemonic.size() > 40 ? plan.mnemonic.substr(0, 40) + "..." : plan.mnemonic);
  state.counters["kernels"] = wl.size();
  state.counters["period_ms_modelled"] = plan.period_s * 1e3;
  state.counters["energy_J_modelled"] = plan.energy_j;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void BM_GcnPaperSystem(benchmark::State& s) {
  run(s, paper_testbed(), gnn("gcn.yaml", 0), static_cast<Objective>(s.range(0)));
}
void BM_GinPaperSystem(benchmark::State& s) {
  run(s, paper_testbed(), gnn("gin.yaml", 0), static_cast<Objective>(s.range(0)));
}
void BM_Transformer32Layers(benchmark::State& s) {
  run(s, paper_testbed(), transformer(), static_cast<Objective>(s.range(0)));
}
void BM_Gcn64Kernels3x8(benchmark::State& s) {
  run(s, three_by_eight(), gnn("gcn.yaml", 32), static_cast<Objective>(s.range(0)));
}
void BM_GcnPaperSystemPaperSolver(benchmark::State& s) {
  run(s, paper_testbed(), gnn("gcn.yaml", 0), Objective::perf, SolverKind::paper);
}

// Arg: 0 perf, 1 energy, 2 balanced.
BENCHMARK(BM_GcnPaperSystem)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_GinPaperSystem)->Arg(0)->Arg(2)->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_GcnPaperSystemPaperSolver)->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Transformer32Layers)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
    ->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Gcn64Kernels3x8)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
    ->Repetitions(3)->Iterations(1)->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
