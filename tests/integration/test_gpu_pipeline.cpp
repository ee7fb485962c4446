// A real GPU (CUDA or HIP, whichever backends were compiled and found a device) runs whole model
// pipelines end to end: GCN, GIN and the window transformer, all on the GPU and split between the
// host CPU and the GPU, each output against the single-device CPU reference. Without a GPU every
// case skips and says why (scripts/gpu_check.sh runs this on a GPU machine).
// DYPE_GPU_CHECK_SYSTEM=configs/systems/paper-testbed-pcie4.yaml runs the same cases on a system
// file's GPUs instead of the detected ones: a dry run of the check on emulated devices.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hw/system.h"
#include "hw/system_config.h"
#include "runtime/model.h"
#include "runtime/pipeline.h"
#include "../test_rt_requests.h"

namespace dype::rt {
namespace {

const hw::System& detected() {
  static const hw::System sys = [] {
    const char* file = std::getenv("DYPE_GPU_CHECK_SYSTEM");
    return file != nullptr ? hw::System::from_config(hw::load_system_config(file)) : hw::System::detect();
  }();
  return sys;
}

hw::Device* first_gpu() {
  auto gpus = detected().devices_of(hw::DeviceKind::gpu);
  return gpus.empty() ? nullptr : gpus.front();
}

hw::Device* host_cpu() {
  auto cpus = detected().devices_of(hw::DeviceKind::cpu);
  return cpus.empty() ? nullptr : cpus.front();
}

// The ops of `model` that `device` cannot run, named; empty when it runs them all.
std::string unsupported_ops(const Model& model, const hw::Device& device) {
  std::string missing;
  for (const auto& step : model.steps()) {
    if (device.supports(step.op) || missing.find(kernels::to_string(step.op)) != std::string::npos) continue;
    missing += (missing.empty() ? "" : ", ") + std::string(kernels::to_string(step.op));
  }
  return missing;
}

// GPU reductions sum in another order than the CPU kernels, hence 1e-4 rather than 1e-5.
void run_and_check(const Model& m, PipelineSpec spec, const std::vector<Request>& reqs) {
  const std::string what = describe(spec);
  testing::expect_pipeline_matches_reference(m, std::move(spec), reqs, what, 1e-4, /*queue_capacity=*/2);
}

// All kernels on the GPU, then every cut between the host CPU (first part) and the GPU.
void check_model(const Model& m, const std::vector<Request>& reqs) {
  hw::Device* gpu = first_gpu();
  if (gpu == nullptr) GTEST_SKIP() << "no GPU detected on this machine (CUDA/HIP backends found none)";
  if (auto missing = unsupported_ops(m, *gpu); !missing.empty())
    GTEST_SKIP() << gpu->name() << " (" << gpu->info().backend << ") does not run " << missing;
  const int last = m.num_kernels() - 1;
  run_and_check(m, {.stages = {{.first = 0, .last = last, .devices = {gpu}}}, .label = "1G"}, reqs);
  hw::Device* cpu = host_cpu();
  if (cpu == nullptr) return;
  for (int cut = 0; cut < last; ++cut) {
    run_and_check(m,
                  {.stages = {{.first = 0, .last = cut, .devices = {cpu}}, {.first = cut + 1, .last = last, .devices = {gpu}}},
                   .label = "1C1G"},
                  reqs);
  }
}

TEST(GpuPipeline, GcnMatchesCpuReference) {
  Model m = Model::gcn({.layers = 2, .in_features = 64, .hidden = 128, .seed = 3});
  check_model(m, testing::gnn_requests(m, 5000, 60000, 3, 7, 300));
}

TEST(GpuPipeline, GinMatchesCpuReference) {
  Model m = Model::gin({.layers = 2, .in_features = 64, .hidden = 128, .seed = 4});
  check_model(m, testing::gnn_requests(m, 3000, 30000, 3, 7, 300));
}

TEST(GpuPipeline, TransformerMatchesCpuReference) {
  Model m = Model::transformer({.layers = 2, .d_model = 256, .heads = 4, .ffn = 512, .seed = 5});
  check_model(m, testing::tf_requests(m, 1024, 128, 2, 400));
}

// nn.TransformerEncoderLayer's block: LayerNorm on the GPU, the skip connection added in the
// GEMM epilogue, GELU in the FFN; post-norm and pre-norm.
TEST(GpuPipeline, EncoderWithResidualAndLayerNormMatchesCpuReference) {
  for (const bool pre : {false, true}) {
    Model m = Model::transformer({.layers = 2, .activation = Nonlinearity::gelu, .d_model = 256, .heads = 4, .ffn = 512,
                                  .residual_norm = true, .norm_first = pre, .seed = 6});
    check_model(m, testing::tf_requests(m, 1024, 128, 2, 401));
  }
}

}  // namespace
}  // namespace dype::rt
