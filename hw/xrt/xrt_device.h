#pragma once
// XrtDevice: one Xilinx/AMD FPGA board through the XRT native API. An xclbin is loaded from a
// bitstream manifest (hw/xrt/xrt_manifest.h), whose kernels are launched with xrt::run using the
// manifest's argument layout (kernels/xrt/xrt_args.h). Buffers are xrt::bo (normal, or
// flags::p2p when the config enables peer transfers). Bitstream swap: drain the launches in flight
// (an exclusive lock), release kernels, park every buffer's contents in host memory and drop the
// bos, load_xclbin, recreate kernels and buffers; on failure the previous image is reloaded and
// restored (rollback). Board power from xrt::info::device::electrical where the board reports it.
// Events are measured (host steady clock around run.start() .. run.wait()).
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include <xrt/xrt_device.h>
#include <xrt/xrt_kernel.h>
#include <xrt/xrt_uuid.h>

#include "hw/device.h"
#include "hw/device_profile.h"
#include "hw/xrt/xrt_manifest.h"

namespace dype::hw {

class XrtBuffer;

// "power_consumption_watts" from the electrical JSON; nullopt when absent or "N/A".
std::optional<double> parse_board_power_w(const std::string& electrical_json);

class XrtDevice final : public Device {
 public:
  // Opens board `index` (xrt::device(index)); throws DeviceError when XRT cannot.
  XrtDevice(DeviceInfo info, unsigned index, bool p2p_buffers = false);
  ~XrtDevice() override;

  ::xrt::device& native() { return device_; }
  bool supports(kernels::OpKind op) const override;
  BufferPtr allocate(std::size_t bytes, AllocMode mode = AllocMode::data) override;
  std::optional<EnergyReport> energy() const override;

  // Loads the manifest's xclbin and kernels (the swap described above). Returns the time taken.
  // Throws InputError for a bad manifest, DeviceError when loading fails (after rollback).
  double load_bitstream(const std::string& manifest_file);
  const std::string& bitstream_file() const { return manifest_.file; }
  // The Device capability: the same swap from a parsed manifest (its file), timed (measured).
  bool reconfigurable() const override { return true; }
  Event load_bitstream(const Bitstream& bitstream) override;
  const Bitstream* bitstream() const override;
  std::optional<double> board_power_w() const;

  // Buffers register themselves so a swap can park and restore them.
  void track(XrtBuffer* b);
  void untrack(XrtBuffer* b);


 protected:
  Event do_launch(const KernelLaunch& launch, std::span<const Event> after, int queue) override;
  Event do_copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                          std::span<const Event> after) override;
  Event do_copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                        std::span<const Event> after) override;

 private:
  struct Image {
    XrtManifest manifest;
    ::xrt::uuid uuid;
    std::map<kernels::OpKind, ::xrt::kernel> kernels;
  };
  Image open_image(const XrtManifest& m);  // load_xclbin + kernels
  ::xrt::memory_group default_group() const;

  unsigned index_;
  bool p2p_buffers_;
  ::xrt::device device_;
  mutable std::shared_mutex swap_mutex_;  // shared: launches and copies; exclusive: a swap
  XrtManifest manifest_;
  std::optional<Bitstream> image_;  // the loaded image as a Bitstream, when loaded as one
  ::xrt::uuid uuid_;
  std::map<kernels::OpKind, ::xrt::kernel> kernels_;
  std::mutex buffers_mutex_;
  std::vector<XrtBuffer*> buffers_;
  mutable std::mutex energy_mutex_;
  double execute_j_ = 0.0;
  bool energy_known_ = false;
};

}  // namespace dype::hw
