#pragma once
// HipDevice: one AMD GPU (the paper's MI210 path), the GPU backend written once
// (hw/gpu/gpu_device.h: queues, timing, pinned double-buffered host copies, peer copies through
// hipMemcpyPeerAsync when hipDeviceCanAccessPeer says so and the config allows P2P, ROCm SMI
// energy) on the HIP runtime, plus what is HIP's own: SpMM through rocSPARSE's generic API (CSR,
// rocsparse_spmm staged: buffer size, preprocess once, then compute; the plan is kept while the
// graph buffers are unchanged), an own tiled FP32 GEMM with the bias/ReLU epilogue fused (rocBLAS
// is not packaged in Debian 12), own row softmax (warp-size aware) and sliding-window attention
// (kernels/hip), and copies to and from a peer's mapped PCIe window. Each queue has its own
// rocSPARSE handle on its stream. Events are measured (hipEvent timing, placed on the host steady
// clock at completion).
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hw/gpu/gpu_device.h"
#include "hw/hip/hip_buffer.h"
#include "hw/hip/hip_runtime.h"

namespace dype::hw {

using HipOptions = GpuOptions;

class HipDevice final : public GpuDevice<HipRuntime> {
 public:
  HipDevice(DeviceInfo info, int ordinal, HipOptions options = {});
  ~HipDevice() override;

  // Direct copies between this GPU and a peer's PCIe memory window mapped into the process (an
  // FPGA's flags::p2p xrt::bo, bo.map()): the paper's MI210 <-> U280 path, hipMemcpy on a mapped
  // address. The window is registered once with hipHostRegister (IoMemory: it is device memory
  // behind a BAR, not RAM) and unregistered when this device goes away. Throws InputError when
  // the copy overruns the buffer, DeviceError when HIP refuses the window.
  Event copy_to_mapped(const hw::Buffer& src, std::span<std::byte> window, std::size_t src_offset = 0);
  Event copy_from_mapped(hw::Buffer& dst, std::span<const std::byte> window, std::size_t dst_offset = 0);

  int warp_size() const { return warp_size_; }

 protected:
  void run_spmm(int queue, hipStream_t stream, const KernelLaunch& l) override;
  void run_gemm(int queue, hipStream_t stream, const KernelLaunch& l) override;
  void run_window_attention(hipStream_t stream, const KernelLaunch& l) override;
  void run_softmax(hipStream_t stream, const KernelLaunch& l) override;
  void run_layer_norm(hipStream_t stream, const KernelLaunch& l) override;

 private:
  struct Libraries;  // the rocSPARSE handle and SpMM plans of one queue
  void register_window(const std::byte* base, std::size_t bytes);
  Event copy_mapped(CopyDirection direction, void* to, const void* from, std::size_t bytes);

  int warp_size_ = 64;
  std::vector<std::unique_ptr<Libraries>> libraries_;
  std::mutex windows_mutex_;
  std::vector<std::pair<const std::byte*, std::size_t>> windows_;  // registered mapped windows
};

// A detected GPU's description (name, memory) from hipGetDeviceProperties.
DeviceInfo hip_device_info(int ordinal, const std::string& name);

}  // namespace dype::hw
