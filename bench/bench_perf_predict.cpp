// Cost of one performance-model prediction (the scheduler calls it for every kernel x device kind
// x device count it considers), single-device and as a multi-device stage.
#include <benchmark/benchmark.h>

#include "perfmodel/model.h"
#include "perfmodel/multi_device.h"
#include "perfmodel/synthetic.h"

namespace {

using namespace dype::perf;
using dype::kernels::OpKind;
using dype::kernels::OpShape;

KernelModel fitted_model(OpKind kind, DeviceClass cls) {
  const FeatureSet& fs = feature_set(kind, cls);
  SyntheticRanges r;
  r.allow_timing_only = true;
  r.max_work = 1e13;
  std::vector<Sample> samples;
  for (const auto& s : generate_specs(kind, r, 100, 1)) {
    samples.push_back({s.shape, 1e-5 + 1e-11 * work_of(s.shape)});
  }
  return KernelModel(fs, FeatureParams{}, fit_model(fs, FeatureParams{}, samples), samples);
}

std::vector<OpShape> shapes(OpKind kind) {
  SyntheticRanges r;
  r.allow_timing_only = true;
  r.max_work = 1e13;
  std::vector<OpShape> out;
  for (const auto& s : generate_specs(kind, r, 256, 2)) out.push_back(s.shape);
  return out;
}

void BM_Predict(benchmark::State& state, OpKind kind, DeviceClass cls) {
  const KernelModel m = fitted_model(kind, cls);
  const auto in = shapes(kind);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.predict(in[i++ & 255]));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PredictStage4(benchmark::State& state) {
  const KernelModel m = fitted_model(OpKind::spmm, DeviceClass::gpu);
  const auto in = shapes(OpKind::spmm);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(predict_stage(m, in[i++ & 255], 4, StageLink{}));
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_Predict, spmm_gpu_eq7, OpKind::spmm, DeviceClass::gpu);
BENCHMARK_CAPTURE(BM_Predict, spmm_cpu, OpKind::spmm, DeviceClass::cpu);
BENCHMARK_CAPTURE(BM_Predict, spmm_fpga_sextans, OpKind::spmm, DeviceClass::fpga);
BENCHMARK_CAPTURE(BM_Predict, gemm_eq8, OpKind::gemm, DeviceClass::gpu);
BENCHMARK_CAPTURE(BM_Predict, window_attention_cpu, OpKind::window_attention, DeviceClass::cpu);
BENCHMARK(BM_PredictStage4);

}  // namespace

BENCHMARK_MAIN();
