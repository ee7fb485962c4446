#pragma once
// CudaDevice: one NVIDIA GPU. SpMM through cuSPARSE's generic API (CSR; the plan — descriptors,
// workspace and cusparseSpMM_preprocess — is kept while the graph buffers are unchanged), GEMM
// through cuBLAS (row-major via the transpose identity, kernels/cuda/launch_plan.h), own kernels
// for the bias/ReLU epilogue, row softmax and sliding-window attention. Each queue is a CUDA
// stream with its own cuBLAS/cuSPARSE handles, so launches on different queues from different
// threads overlap. Host copies stage through pinned memory in double-buffered chunks; peer copies
// use cudaMemcpyPeerAsync when cudaDeviceCanAccessPeer says so and the config allows P2P. Energy
// from NVML when the driver provides it. Events are measured (cudaEvent timing, placed on the
// host steady clock at completion).
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "hw/device.h"

namespace dype::hw {

class Nvml;
class CudaBuffer;

// Throws (DeviceError / InputError per kernels::cuda::classify_cuda_error) when rc != cudaSuccess.
void cuda_check(const std::string& device, std::string_view call, cudaError_t rc);

struct CudaOptions {
  int queues = 4;                            // streams (and handle sets)
  std::size_t staging_chunk_bytes = 8 << 20;  // per pinned staging slot (two slots)
  bool allow_p2p = true;                     // the config's p2p flag
};

class CudaDevice final : public Device {
 public:
  CudaDevice(DeviceInfo info, int ordinal, CudaOptions options = {});
  ~CudaDevice() override;

  int ordinal() const { return ordinal_; }
  bool supports(kernels::OpKind op) const override;
  BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) override;
  std::optional<EnergyReport> energy() const override;

  // Whether cudaMemcpyPeerAsync to `peer` is used (hardware peer access and config allow it).
  bool can_copy_peer(const CudaDevice& peer) const;
  // SpMM plans built so far (cusparseSpMM_preprocess calls): reused while the graph is unchanged.
  int spmm_plans_built() const { return spmm_plans_built_; }


 protected:
  Event do_launch(const KernelLaunch& launch, std::span<const Event> after, int queue) override;
  Event do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                          std::span<const Event> after) override;
  Event do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                        std::span<const Event> after) override;
  Event do_copy_to_peer(const Buffer& src, Buffer& dst, std::span<const Event> after) override;

 private:
  struct Queue;
  struct SpmmPlan;
  Queue& queue(int index);
  void set_current() const;
  Event timed(Queue& q, const std::function<void()>& enqueue);
  void run_spmm(Queue& q, const KernelLaunch& l);
  void run_gemm(Queue& q, const KernelLaunch& l);

  int ordinal_;
  CudaOptions options_;
  std::size_t max_shared_bytes_ = 48 * 1024;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::mutex staging_mutex_;
  struct Staging;
  std::unique_ptr<Staging> staging_;
  std::shared_ptr<Nvml> nvml_;
  std::string pci_bus_id_;
  std::mutex peers_mutex_;
  std::vector<int> peers_enabled_;
  double energy_at_start_j_ = 0.0;
  std::atomic<int> spmm_plans_built_{0};
};

// A detected GPU's description (name, memory) from cudaGetDeviceProperties.
DeviceInfo cuda_device_info(int ordinal, const std::string& name);

}  // namespace dype::hw
