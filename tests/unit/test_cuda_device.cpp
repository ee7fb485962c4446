// What only the cuda backend does: layer_norm is not ported to it (the planner keeps layer_norm
// off CUDA GPUs). Detection, staging chunks, SpMM plan reuse and peer copies, shared with HIP,
// run in test_gpu_device.cpp; kernels against the CPU in test_device_conformance.cpp.
// Without a driver or GPU the case skips with GTEST_SKIP() saying why.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hw/registry.h"
#include "hw/system_config.h"

#if DYPE_HAVE_CUDA
#include "hw/cuda/cuda_backend.h"
#endif

namespace hw = dype::hw;

#if !DYPE_HAVE_CUDA
TEST(CudaDevice, NotBuilt) { GTEST_SKIP() << "built without CUDA (DYPE_WITH_CUDA=OFF or no nvcc)"; }
#else

TEST(CudaDevice, LayerNormIsNotSupported) {
  std::string why;
  const auto found = hw::detect_cuda_devices(&why);
  if (found.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  hw::SystemConfig sys;
  auto gpu = hw::find_backend("cuda")->create(found.front(), sys);
  EXPECT_FALSE(gpu->supports(dype::kernels::OpKind::layer_norm));
  EXPECT_TRUE(gpu->supports(dype::kernels::OpKind::spmm));
}

#endif
