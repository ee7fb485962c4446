#include "hw/device.h"

#include <chrono>
#include <vector>

namespace dype::hw {

double now_s() {
  static const auto epoch = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch).count();
}

std::optional<DeviceKind> device_kind_from_string(std::string_view s) {
  for (DeviceKind k : {DeviceKind::cpu, DeviceKind::gpu, DeviceKind::fpga}) {
    if (to_string(k) == s) return k;
  }
  return std::nullopt;
}

void Device::reserve_memory(std::size_t bytes) {
  std::size_t used = used_bytes_.load();
  do {
    if (info_.memory_bytes != 0 && used + bytes > info_.memory_bytes) {
      throw DeviceError(info_.name, "out of memory: " + std::to_string(bytes) +
                                        " bytes requested, " + std::to_string(used) + " of " +
                                        std::to_string(info_.memory_bytes) + " in use");
    }
  } while (!used_bytes_.compare_exchange_weak(used, used + bytes));
}

void check_copy_range(const std::string& where, std::size_t offset, std::size_t bytes,
                      std::size_t capacity) {
  if (offset > capacity || bytes > capacity - offset) {
    throw InputError(where, "copy of " + std::to_string(bytes) + " bytes at offset " +
                                std::to_string(offset) + " overruns a buffer of " +
                                std::to_string(capacity));
  }
}

void Device::check_owned(const Buffer& buffer, std::string_view what) const {
  if (&buffer.device() != this) {
    throw InputError(name(), std::string(what) + ": buffer is not on this device");
  }
}

Event Device::launch(const KernelLaunch& l, std::span<const Event> after, int queue) {
  validate(l, name());
  for (std::size_t i = 0; i < l.inputs.size(); ++i) check_owned(*l.inputs[i], "input " + std::to_string(i));
  check_owned(*l.output, "output");
  return do_launch(l, after, queue);
}

Event Device::copy_from_host(Buffer& dst, std::span<const std::byte> src, std::size_t offset,
                             std::span<const Event> after) {
  check_owned(dst, "copy_from_host dst");
  check_copy_range(name() + ": copy_from_host", offset, src.size(), dst.size_bytes());
  return do_copy_from_host(dst, src, offset, after);
}

Event Device::copy_to_host(const Buffer& src, std::span<std::byte> dst, std::size_t offset,
                           std::span<const Event> after) {
  check_owned(src, "copy_to_host src");
  check_copy_range(name() + ": copy_to_host", offset, dst.size(), src.size_bytes());
  return do_copy_to_host(src, dst, offset, after);
}

Event Device::copy_to_peer(const Buffer& src, Buffer& dst, std::span<const Event> after) {
  return copy_to_peer(src, dst, CopyRegion{0, 0, src.size_bytes()}, after);
}

Event Device::copy_to_peer(const Buffer& src, Buffer& dst, const CopyRegion& region, std::span<const Event> after) {
  if (&src.device() != this) throw Error(name() + ": copy_to_peer: source buffer is not on this device");
  check_copy_range(name() + ": copy_to_peer source", region.src_offset, region.bytes, src.size_bytes());
  check_copy_range(name() + ": copy_to_peer destination", region.dst_offset, region.bytes, dst.size_bytes());
  return do_copy_to_peer(src, dst, region, after);
}

Event Device::do_copy_to_peer(const Buffer& src, Buffer& dst, const CopyRegion& region, std::span<const Event> after) {
  return copy_to_peer_staged(src, dst, region, after);
}

Event Device::copy_to_peer_staged(const Buffer& src, Buffer& dst, const CopyRegion& region,
                                  std::span<const Event> after) {
  // Staged through host memory: device -> host, host -> peer.
  std::vector<std::byte> staging(region.bytes);
  Event down = copy_to_host(src, staging, region.src_offset, after);
  Event up = dst.device().copy_from_host(dst, staging, region.dst_offset, std::span<const Event>(&down, 1));
  Event e;
  e.start_s = down.start_s;
  e.end_s = up.end_s;
  e.source = (down.source == TimeSource::modelled || up.source == TimeSource::modelled)
                 ? TimeSource::modelled
                 : TimeSource::measured;
  e.energy_j = (down.energy_j >= 0 && up.energy_j >= 0) ? down.energy_j + up.energy_j : -1.0;
  return e;
}

void Device::set_timing_only(bool on) {
  if (on && !can_run_timing_only())
    throw DeviceError(name(), "cannot run timing-only (only devices timed by a device profile can)");
}

Event Device::load_bitstream(const Bitstream& /*bitstream*/) {
  throw DeviceError(name(), "does not load bitstreams (not a reconfigurable FPGA)");
}

void Device::unload_bitstream() {
  throw DeviceError(name(), "does not unload bitstreams (not a reconfigurable FPGA)");
}

}  // namespace dype::hw
