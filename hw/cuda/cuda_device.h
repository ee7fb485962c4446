#pragma once
// CudaDevice: one NVIDIA GPU, the GPU backend written once (hw/gpu/gpu_device.h: queues, timing,
// pinned double-buffered host copies, peer copies through cudaMemcpyPeerAsync when
// cudaDeviceCanAccessPeer says so and the config allows P2P, NVML energy) on the CUDA runtime, plus
// what is CUDA's own: SpMM through cuSPARSE's generic API (CSR, ALG2; the plan — descriptors and
// workspace — is kept while the graph buffers are unchanged), GEMM through
// cuBLAS (row-major via the transpose identity, kernels/cuda/launch_plan.h), own kernels for the
// bias/ReLU epilogue, row softmax and sliding-window attention. Each queue has its own cuBLAS and
// cuSPARSE handles on its stream. Events are measured (cudaEvent timing, placed on the host
// steady clock at completion).
#include <memory>
#include <string>
#include <vector>

#include "hw/cuda/cuda_buffer.h"
#include "hw/cuda/cuda_runtime.h"
#include "hw/gpu/gpu_device.h"

namespace dype::hw {

using CudaOptions = GpuOptions;

class CudaDevice final : public GpuDevice<CudaRuntime> {
 public:
  CudaDevice(DeviceInfo info, int ordinal, CudaOptions options = {});
  ~CudaDevice() override;

 protected:
  void run_spmm(int queue, cudaStream_t stream, const KernelLaunch& l) override;
  void run_gemm(int queue, cudaStream_t stream, const KernelLaunch& l) override;
  void run_window_attention(cudaStream_t stream, const KernelLaunch& l) override;
  void run_softmax(cudaStream_t stream, const KernelLaunch& l) override;
  void run_layer_norm(cudaStream_t stream, const KernelLaunch& l) override;

 private:
  struct Libraries;  // cuBLAS + cuSPARSE handles and SpMM plans of one queue
  std::vector<std::unique_ptr<Libraries>> libraries_;
};

// A detected GPU's description (name, memory) from cudaGetDeviceProperties.
DeviceInfo cuda_device_info(int ordinal, const std::string& name);

}  // namespace dype::hw
