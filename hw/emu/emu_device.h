#pragma once
// EmuDevice: an emulated GPU or FPGA. Results are computed with the CPU kernels (so they are
// correct); time and energy come from the device model (hw/kernel_timing_model.h) on a virtual clock:
// an operation starts at max(device free, inputs ready, events waited on) and ends after its
// modelled duration. Copies occupy the device too (and both devices for a peer copy), matching the
// cost model T_s = X_s + C_s + X_{s+1}; with EmuOptions::overlap_copies they occupy the devices'
// copy engines instead, one per direction (links are full duplex: host -> device and peer copies
// received inbound, device -> host and peer copies sent outbound), so T_s = max(kernels, inbound
// copies, outbound copies).
// Every Event it returns is labelled `modelled`.
//
// FPGAs run only the kernels of their loaded bitstream (none before load_bitstream). Timing-only
// mode skips the arithmetic and allocates size-only buffers so paper-scale shapes take no time.
// Optional seeded jitter perturbs modelled durations; fault injection makes an operation throw.
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hw/device.h"
#include "hw/device_profile.h"

namespace dype::hw {

struct EmuOptions {
  bool timing_only = false;
  // Copies run on virtual copy engines, one per direction (a device's DMA engines: transfers
  // overlap the kernels of other requests) instead of the compute clock. The system option `transfers:
  // overlap` (hw/system_config.h) sets it; `serial` is the paper's timing (copies block the device).
  bool overlap_copies = false;
  double jitter_sigma = 0.0;  // relative std-dev of each modelled duration; 0 = deterministic
  std::uint64_t jitter_seed = 1;
};

class EmuDevice final : public Device {
 public:
  EmuDevice(DeviceInfo info, DeviceProfile model, EmuOptions options = {});

  const DeviceProfile& profile() const { return profile_; }
  bool supports(kernels::OpKind op) const override;
  BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) override;
  // Energy over [0, clock_s()] from the power states (idle / execute / transfer), modelled. With
  // overlapping copies a copy draws its increment above idle (transfer_j) on top of whatever the
  // device does meanwhile, and idle_j covers the time the kernels leave.
  std::optional<EnergyReport> energy() const override { return energy_until(clock_s()); }
  EnergyReport energy_until(double t_s) const;

  // FPGA bitstreams. Loading takes bitstream.load_time_s on the virtual clock; a bitstream built
  // for another board is refused (DeviceError).
  bool reconfigurable() const override { return kind() == DeviceKind::fpga; }
  Event load_bitstream(const Bitstream& bitstream) override;
  void unload_bitstream() override;
  const Bitstream* bitstream() const override { return bitstream_ ? &*bitstream_ : nullptr; }

  bool can_run_timing_only() const override { return true; }
  bool copies_overlap() const override { return options_.overlap_copies; }
  void set_timing_only(bool on) override;
  bool timing_only() const override;
  void set_jitter(double sigma, std::uint64_t seed);
  // The next operation (after `skip` more succeed) throws DeviceError naming this device.
  void inject_fault(int skip = 0, std::string reason = "injected fault");

  // Modelled duration of a shape here (no jitter), for tests and synthetic profiles.
  double modelled_time_s(const kernels::OpShape& shape) const;
  std::optional<double> modelled_kernel_time_s(const kernels::OpShape& shape) const override {
    return modelled_time_s(shape);
  }
  const DeviceProfile* device_profile() const override { return &profile_; }
  double clock_s() const;   // when the device is next free
  void reset_clock();       // back to 0, energy counters cleared (buffers keep their data)


 protected:
  Event do_launch(const KernelLaunch& launch, std::span<const Event> after, int queue) override;
  Event do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                          std::span<const Event> after) override;
  Event do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                        std::span<const Event> after) override;
  // Emulated peer: P2P when the topology allows, else staged through host (both modelled).
  Event do_copy_to_peer(const Buffer& src, Buffer& dst, const CopyRegion& region, std::span<const Event> after) override;

 private:
  void check_fault_locked();
  double jittered_locked(double t);
  double transfer_time_to_host_s(std::size_t bytes) const;

  DeviceProfile profile_;
  EmuOptions options_;
  std::optional<Bitstream> bitstream_;
  mutable std::mutex mutex_;
  // A DMA engine's timeline: copies take the earliest gap after they are ready (a copy engine
  // serves transfers as they become ready, not in the order the host happened to issue them), so
  // the next request's input can arrive while this one's output is still waiting for its kernel.
  class CopyEngine {
   public:
    double earliest(double ready, double dur) const;  // start of the first free [t, t + dur], t >= ready
    void reserve(double start, double end);
    double end() const { return busy_.empty() ? floor_ : std::max(floor_, busy_.back().second); }
    void reset() { busy_.clear(), floor_ = 0.0; }

   private:
    static constexpr std::size_t kKept = 256;  // older gaps are forgotten (treated as busy)
    std::vector<std::pair<double, double>> busy_;  // sorted, disjoint
    double floor_ = 0.0;
  };
  // A copy's direction as this device sees it: links are full duplex and a device copies each
  // way on its own engine (host -> device and peer copies received inbound, device -> host and
  // peer copies sent outbound).
  enum class Direction { inbound, outbound };
  // Where a copy of `dur` seconds ready at `ready` starts (compute clock, or that direction's
  // copy engine).
  double copy_start(Direction d, double ready, double dur) const;
  void copy_done(Direction d, double start, double end);
  double busy_until_s_ = 0.0;  // the compute clock (and the copies' when they do not overlap)
  CopyEngine copies_in_, copies_out_;  // overlap_copies
  double copy_energy_w() const;  // what a copy draws, per second
  double execute_j_ = 0.0;
  double transfer_j_ = 0.0;
  double busy_s_ = 0.0;  // time spent executing or (serial copies) transferring; the rest is idle
  int fault_skip_ = -1;  // < 0: no fault armed
  std::string fault_reason_;
  std::mt19937_64 rng_;
};

}  // namespace dype::hw
