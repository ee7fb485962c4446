#pragma once
// Device: the small interface every backend implements (hw/<backend>/<backend>_device.h), in the
// shape of ONNX Runtime's execution providers and ggml-backend. Only allocate and the hooks
// do_launch, do_copy_from_host and do_copy_to_host are required; everything else has a default.
// As in ggml-backend (ggml_backend_tensor_set checks, then iface.set_tensor), the public calls
// are not virtual: they validate once (launch shape, buffer ownership, copy bounds) and then call
// the backend's protected hook, so no backend repeats or forgets a check.
//
//   hw::System sys = hw::System::from_config(hw::load_system_config("configs/systems/local.yaml"));
//   hw::Device& dev = sys.device("cpu0");
//   hw::BufferPtr x = dev.allocate(bytes), y = dev.allocate(bytes), w = dev.allocate(wbytes);
//   dev.copy_from_host(*x, host_bytes);
//   hw::Event e = dev.launch(hw::KernelLaunch::gemm(*x, *w, nullptr, *y, m, k, n));
//   std::printf("%.3f ms (%s)\n", e.duration_s() * 1e3, to_string(e.source).data());
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hw/buffer.h"
#include "hw/event.h"
#include "hw/kernel_launch.h"
#include "hw/power.h"
#include "common/error.h"
#include "common/op.h"

namespace dype::hw {

class Topology;
class DeviceIpcMemory;
struct Bitstream;
struct DeviceProfile;

enum class DeviceKind : std::uint8_t { cpu, gpu, fpga };

constexpr std::string_view to_string(DeviceKind k) {
  switch (k) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::fpga: return "fpga";
  }
  return "unknown";
}
std::optional<DeviceKind> device_kind_from_string(std::string_view s);

// A device could not do what was asked (failed launch, out of memory, injected fault). The message
// starts with the device name.
class DeviceError : public Error {
 public:
  DeviceError(const std::string& device, const std::string& problem)
      : Error(device + ": " + problem), device_(device) {}
  const std::string& device() const noexcept { return device_; }

 private:
  std::string device_;
};

struct DeviceInfo {
  std::string name;     // unique in a system: "gpu0", "fpga2", "cpu0"
  DeviceKind kind = DeviceKind::cpu;
  std::string product;  // "AMD Instinct MI210"
  std::string backend;  // "cpu", "emu", "cuda", "hip", "xrt"
  std::size_t memory_bytes = 0;
  TimeSource time_source = TimeSource::measured;  // how its Events are timed
  PowerStates power;    // for cost models; from the device model / system config
};

// A peer copy's region: `bytes` from `src_offset` in the source buffer to `dst_offset` in the
// destination.
struct CopyRegion {
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t bytes = 0;
};

class Device {
 public:
  explicit Device(DeviceInfo info) : info_(std::move(info)) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  DeviceKind kind() const { return info_.kind; }

  virtual bool supports(kernels::OpKind op) const = 0;

  // Throws DeviceError when the memory would exceed memory_bytes.
  virtual BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) = 0;
  std::size_t memory_used_bytes() const { return used_bytes_; }

  // Runs the kernel; starts no earlier than every event in `after` and every input's ready time.
  // Throws InputError for a malformed launch (hw::validate) or a buffer of another device,
  // DeviceError for an op the device does not support. `queue` selects a stream on backends that
  // have several; cpu and emu have one. Validates here, once, then calls do_launch.
  Event launch(const KernelLaunch& launch, std::span<const Event> after = {}, int queue = 0);

  // Host <-> device copies of `bytes` bytes at `offset` in the device buffer. Throw InputError
  // when the buffer is another device's or the copy overruns it ("copy of N bytes at offset M
  // overruns a buffer of K"); then call do_copy_from_host / do_copy_to_host.
  Event copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset = 0,
                       std::span<const Event> after = {});
  Event copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset = 0,
                     std::span<const Event> after = {});

  // Copies the whole of `src` (on this device) into `dst` (on a peer), or one region of it: `bytes`
  // from `src_offset` in src to `dst_offset` in dst (a shard's rows into a peer's wider buffer).
  // Checks ownership and bounds ("copy of N bytes at offset M overruns a buffer of K"), then calls
  // do_copy_to_peer: the default stages through host memory; backends with peer access override
  // it and consult the topology for P2P.
  Event copy_to_peer(const Buffer& src, Buffer& dst, std::span<const Event> after = {});
  Event copy_to_peer(const Buffer& src, Buffer& dst, const CopyRegion& region, std::span<const Event> after = {});

  // Copies `bytes` of another process's GPU memory (opened from an IPC handle: the CUDA
  // shared-memory extension), from `src_offset`, into `dst` on this device, when that memory lies
  // on this very device: a device-local copy instead of a round trip through the host. nullopt
  // when this device cannot (another device or vendor, not a GPU). InputError past either end.
  virtual std::optional<Event> copy_from_ipc_memory(Buffer& /*dst*/, const DeviceIpcMemory& /*src*/,
                                                    std::size_t /*src_offset*/,
                                                    std::size_t /*bytes*/) {
    return std::nullopt;
  }

  // The reverse: `bytes` of `src` (on this device) from `src_offset` into another process's GPU
  // memory at `dst_offset` (a client's output region, the CUDA shared-memory extension), when that
  // memory lies on this very device. nullopt when this device cannot; InputError past either end.
  virtual std::optional<Event> copy_to_ipc_memory(const Buffer& /*src*/, std::size_t /*src_offset*/,
                                                  const DeviceIpcMemory& /*dst*/,
                                                  std::size_t /*dst_offset*/,
                                                  std::size_t /*bytes*/) {
    return std::nullopt;
  }

  // Host memory used where it lies, as a read-only buffer of this device that holds `keep` (what
  // keeps the memory alive), when this device's kernels read host memory (the CPU): the input a
  // client mapped or sent needs no copy. Null when the device cannot (its memory is not host
  // memory, or copies into it are what an emulated device models). Writing into such a buffer (a
  // kernel's output, a copy's destination) throws InputError.
  virtual BufferPtr borrow_host(std::span<const std::byte> /*bytes*/,
                                std::shared_ptr<const void> /*keep*/) {
    return nullptr;
  }

  // Energy drawn since creation, if the device can tell (a power sensor, or a model on emu).
  virtual std::optional<EnergyReport> energy() const { return std::nullopt; }

  // ---- Optional capabilities. Every device answers them; the defaults say "not this device", so
  // callers ask the interface and never cast to a backend. Whether a device's times are measured
  // or modelled is info().time_source.

  // The device profile (configs/devices/*.yaml) its own times are modelled with; null when its
  // times are measured only (cpu, cuda, hip, xrt).
  virtual const DeviceProfile* device_profile() const { return nullptr; }
  // The modelled duration of `shape` here (no jitter); nullopt for devices without a profile.
  virtual std::optional<double> modelled_kernel_time_s(const kernels::OpShape& /*shape*/) const {
    return std::nullopt;
  }

  // Timing-only mode: operations take their (modelled) time without computing results or holding
  // data, so paper-scale shapes cost nothing. set_timing_only(true) throws DeviceError on devices
  // that cannot (can_run_timing_only() false); switching it off is always allowed.
  virtual bool can_run_timing_only() const { return false; }
  // Whether copies run on the device's copy engines beside its kernels, one per direction (a copy
  // holds the sender's outbound engine and the receiver's inbound one), instead of blocking it.
  virtual bool copies_overlap() const { return false; }
  virtual bool timing_only() const { return false; }
  virtual void set_timing_only(bool on);

  // FPGA images. A reconfigurable device runs the kernels of the image it holds (bitstream(), null
  // when none). load_bitstream swaps in an image built for this board and returns the
  // reconfiguration as an Event; a failed load throws DeviceError and keeps the previous image.
  // unload_bitstream leaves none. Both throw DeviceError on devices that are not reconfigurable.
  virtual bool reconfigurable() const { return false; }
  virtual const Bitstream* bitstream() const { return nullptr; }
  virtual Event load_bitstream(const Bitstream& bitstream);
  virtual void unload_bitstream();

  // Capacity accounting, for backends: allocate reserves (throws DeviceError when full), a
  // Buffer's destructor releases.
  void reserve_memory(std::size_t bytes);
  void release_memory(std::size_t bytes) { used_bytes_ -= bytes; }

  // The topology this device sits in (set by System); null for a stand-alone device.
  const Topology* topology() const { return topology_; }
  int topology_index() const { return topology_index_; }
  void attach(const Topology* topology, int index) {
    topology_ = topology;
    topology_index_ = index;
  }

 protected:
  DeviceInfo& mutable_info() { return info_; }

  // Backend hooks, called by the public calls above after they validated: the launch is
  // well-formed and its buffers are this device's; copies are within the buffer. A hook only
  // executes (and reports what the backend itself detects: unsupported ops, driver errors).
  virtual Event do_launch(const KernelLaunch& launch, std::span<const Event> after, int queue) = 0;
  virtual Event do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                                  std::span<const Event> after) = 0;
  virtual Event do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                                std::span<const Event> after) = 0;
  // The region lies inside both buffers. Default: staged through host memory.
  virtual Event do_copy_to_peer(const Buffer& src, Buffer& dst, const CopyRegion& region, std::span<const Event> after);
  // The staged copy, for overrides that fall back to it (e.g. a peer without P2P).
  Event copy_to_peer_staged(const Buffer& src, Buffer& dst, const CopyRegion& region, std::span<const Event> after);
  // Throws InputError "<what>: buffer is not on this device" unless this device allocated it.
  void check_owned(const Buffer& buffer, std::string_view what) const;

 private:
  DeviceInfo info_;
  std::atomic<std::size_t> used_bytes_{0};
  const Topology* topology_ = nullptr;
  int topology_index_ = -1;
};

using DevicePtr = std::unique_ptr<Device>;

// Throws InputError(where, "copy of N bytes at offset M overruns a buffer of K") when
// [offset, offset + bytes) does not fit in `capacity` bytes. Device's copies call it; backends
// with extra copy paths (HIP's mapped windows) call it too, so the message is written once.
void check_copy_range(const std::string& where, std::size_t offset, std::size_t bytes,
                      std::size_t capacity);

}  // namespace dype::hw
