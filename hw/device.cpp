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

Event Device::copy_to_peer(const Buffer& src, Buffer& dst, std::span<const Event> after) {
  if (&src.device() != this) throw Error(name() + ": copy_to_peer: source buffer is not on this device");
  if (dst.size_bytes() < src.size_bytes()) {
    throw InputError(name() + ": copy_to_peer", "destination holds " +
                                                   std::to_string(dst.size_bytes()) +
                                                   " bytes, source " +
                                                   std::to_string(src.size_bytes()));
  }
  // Staged through host memory: device -> host, host -> peer.
  std::vector<std::byte> staging(src.size_bytes());
  Event down = copy_to_host(src, staging, 0, after);
  Event up = dst.device().copy_from_host(dst, staging, 0, std::span<const Event>(&down, 1));
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
