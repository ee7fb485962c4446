#pragma once
// GpuDevice<Api>: the GPU backend written once for CUDA and HIP, the way ggml builds its HIP
// backend from its CUDA sources through one vendor header. `Api` is a small runtime traits struct
// (hw/cuda/cuda_runtime.h, hw/hip/hip_runtime.h) that maps the runtime calls and types (streams,
// events, copies, peer access, device memory, pinned memory) and names the vendor's power meter.
// Written once here: queues (one stream, its timing events and a mutex each), launch timing on the
// device's events, double-buffered pinned staging for host copies on one stream per direction,
// peer copies, energy readings and the launch dispatch. Each vendor's device (CudaDevice,
// HipDevice) adds only what truly differs: its sparse/dense libraries per queue and the SpMM, GEMM,
// attention and softmax launches.
//
// A traits struct provides: Error, Stream, Event, PowerMeter (load(&why), total_energy_j(bus id)),
// kSuccess, kBackend ("cuda"), kMeterName ("NVML"), call names used in messages (kSetDevice, ...),
// check(device, call, rc) (throws DeviceError / InputError), and the runtime calls used below.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hw/device.h"
#include "hw/gpu/gpu_buffer.h"
#include "hw/gpu/spmm_plan_cache.h"

namespace dype::hw {

struct GpuOptions {
  int queues = 4;                             // streams (and vendor library handle sets)
  std::size_t staging_chunk_bytes = 8 << 20;  // per pinned staging slot (two slots per direction)
  bool allow_p2p = true;                      // the config's p2p flag
  bool overlap_copies = false;                // the system's `transfers: overlap`
};

template <class Api>
class GpuDevice : public Device, public SpmmPlanCount {
 public:
  using Stream = typename Api::Stream;
  using VendorBuffer = GpuBuffer<Api>;

  ~GpuDevice() override;

  int ordinal() const { return ordinal_; }
  bool supports(kernels::OpKind op) const override;
  BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) override;
  // The vendor's power meter (NVML, ROCm SMI) when the driver provides one. It has one counter
  // for the board, so the split by state is not observable: all of it is execute energy.
  std::optional<EnergyReport> energy() const override;

  // Whether a direct peer copy to `peer` is used (hardware peer access and config allow it).
  bool can_copy_peer(const GpuDevice& peer) const;
  // Host copies run on two staging streams, one per direction, beside the kernels' queues: with
  // at least two copy engines (the runtime's async engine count) host -> device and device -> host
  // DMA proceed together. Said only when the system plans `transfers: overlap`, so that the
  // transfer router and the planner's costs assume the same.
  bool copies_overlap() const override { return options_.overlap_copies && copy_engines_ >= 2; }
  // In place when `src` is this vendor's memory on this device: a device-to-device copy on the
  // inbound staging stream.
  std::optional<Event> copy_from_ipc_memory(hw::Buffer& dst, const DeviceIpcMemory& src,
                                            std::size_t src_offset, std::size_t bytes) override;
  std::optional<Event> copy_to_ipc_memory(const hw::Buffer& src, std::size_t src_offset,
                                          const DeviceIpcMemory& dst, std::size_t dst_offset,
                                          std::size_t bytes) override;

 protected:
  GpuDevice(DeviceInfo info, int ordinal, GpuOptions options);

  // The vendor's kernels on queue `queue` (its stream `stream`), inside the launch's timing events.
  virtual void run_spmm(int queue, Stream stream, const KernelLaunch& l) = 0;
  virtual void run_gemm(int queue, Stream stream, const KernelLaunch& l) = 0;
  virtual void run_window_attention(Stream stream, const KernelLaunch& l) = 0;
  virtual void run_softmax(Stream stream, const KernelLaunch& l) = 0;
  virtual void run_layer_norm(Stream stream, const KernelLaunch& l) = 0;

  Event do_launch(const KernelLaunch& launch, std::span<const Event> after, int queue) override;
  Event do_copy_from_host(hw::Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                          std::span<const Event> after) override;
  Event do_copy_to_host(const hw::Buffer& src, std::span<std::byte> dst, std::size_t offset,
                        std::span<const Event> after) override;
  Event do_copy_to_peer(const hw::Buffer& src, hw::Buffer& dst, const hw::CopyRegion& region,
                        std::span<const Event> after) override;

  // The buffer as this vendor's, on this device; InputError naming `arg` otherwise.
  VendorBuffer& on_device(const hw::Buffer* b, const char* arg) const;
  void set_current() const;
  int queue_count() const { return static_cast<int>(queues_.size()); }
  Stream queue_stream(int index) const { return queues_[static_cast<std::size_t>(index)]->stream; }
  // Which staging stream a copy takes: inbound (into this device) or outbound (out of it, peer and
  // device-to-device copies included).
  enum class CopyDirection { inbound, outbound };
  // Runs `enqueue` on that direction's staging stream under its lock and waits for it.
  Event copy_on_staging_stream(CopyDirection direction, const std::function<void(Stream)>& enqueue);
  std::size_t max_shared_bytes() const { return max_shared_bytes_; }

 private:
  struct Queue;
  struct Staging;
  Queue& queue(int index);
  Event timed(Queue& q, const std::function<void()>& enqueue);

  int ordinal_;
  GpuOptions options_;
  std::size_t max_shared_bytes_ = 48 * 1024;
  std::vector<std::unique_ptr<Queue>> queues_;
  Staging& staging(CopyDirection direction) const;
  std::unique_ptr<Staging> inbound_, outbound_;
  int copy_engines_ = 1;
  std::shared_ptr<typename Api::PowerMeter> meter_;
  std::string pci_bus_id_;
  std::mutex peers_mutex_;
  std::vector<int> peers_enabled_;
  double energy_at_start_j_ = 0.0;
};

}  // namespace dype::hw
