#pragma once
// HipDevice: one AMD GPU through HIP/ROCm (the paper's MI210 path). SpMM through rocSPARSE's
// generic API (CSR, rocsparse_spmm staged: buffer size, preprocess once, then compute; the plan —
// descriptors, workspace, preprocessing — is kept while the graph buffers are unchanged). GEMM is
// an own tiled FP32 kernel with the bias/ReLU epilogue fused (rocBLAS is not packaged in Debian
// 12); row softmax and sliding-window attention are own kernels too (kernels/hip). Each queue is
// a HIP stream with its own rocSPARSE handle, so launches on different queues from different
// threads overlap. Host copies stage through pinned memory in double-buffered chunks; peer copies
// use hipMemcpyPeerAsync when hipDeviceCanAccessPeer says so and the config allows P2P. Energy
// from ROCm SMI when the driver provides it. Events are measured (hipEvent timing, placed on the
// host steady clock at completion).
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <hip/hip_runtime_api.h>

#include "hw/device.h"

namespace dype::hw {

class RocmSmi;
class HipBuffer;

// Throws (DeviceError / InputError per kernels::hip::classify_hip_error) when rc != hipSuccess.
void hip_check(const std::string& device, std::string_view call, hipError_t rc);

struct HipOptions {
  int queues = 4;                             // streams (and rocSPARSE handles)
  std::size_t staging_chunk_bytes = 8 << 20;  // per pinned staging slot (two slots)
  bool allow_p2p = true;                      // the config's p2p flag
};

class HipDevice final : public Device {
 public:
  HipDevice(DeviceInfo info, int ordinal, HipOptions options = {});
  ~HipDevice() override;

  int ordinal() const { return ordinal_; }
  bool supports(kernels::OpKind op) const override;
  BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) override;
  std::optional<EnergyReport> energy() const override;

  // Direct copies between this GPU and a peer's PCIe memory window mapped into the process (an
  // FPGA's flags::p2p xrt::bo, bo.map()): the paper's MI210 <-> U280 path, hipMemcpy on a mapped
  // address. The window is registered once with hipHostRegister (IoMemory: it is device memory
  // behind a BAR, not RAM) and unregistered when this device goes away. Throws InputError when
  // the copy overruns the buffer, DeviceError when HIP refuses the window.
  Event copy_to_mapped(const Buffer& src, std::span<std::byte> window, std::size_t src_offset = 0);
  Event copy_from_mapped(Buffer& dst, std::span<const std::byte> window, std::size_t dst_offset = 0);

  // Whether hipMemcpyPeerAsync to `peer` is used (hardware peer access and config allow it).
  bool can_copy_peer(const HipDevice& peer) const;
  // SpMM plans built so far (rocsparse_spmm preprocess stages): reused while the graph is unchanged.
  int spmm_plans_built() const { return spmm_plans_built_; }
  int warp_size() const { return warp_size_; }


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
  struct Staging;
  Queue& queue(int index);
  void set_current() const;
  Event timed(Queue& q, const std::function<void()>& enqueue);
  void register_window(const std::byte* base, std::size_t bytes);
  Event copy_mapped(void* to, const void* from, std::size_t bytes);
  void run_spmm(Queue& q, const KernelLaunch& l);
  void run_gemm(Queue& q, const KernelLaunch& l);

  int ordinal_;
  HipOptions options_;
  std::size_t max_shared_bytes_ = 64 * 1024;
  int warp_size_ = 64;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::mutex staging_mutex_;
  std::unique_ptr<Staging> staging_;
  std::shared_ptr<RocmSmi> smi_;
  std::string pci_bus_id_;
  std::mutex peers_mutex_;
  std::vector<int> peers_enabled_;
  std::mutex windows_mutex_;
  std::vector<std::pair<const std::byte*, std::size_t>> windows_;  // registered mapped windows
  double energy_at_start_j_ = 0.0;
  std::atomic<int> spmm_plans_built_{0};
};

// A detected GPU's description (name, memory) from hipGetDeviceProperties.
DeviceInfo hip_device_info(int ordinal, const std::string& name);

}  // namespace dype::hw
