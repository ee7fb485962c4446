#pragma once
// Event: what one device operation (kernel, copy) did, on the device's timeline.
//
// Devices complete an operation before returning its Event (the CPU runs it, an emulated device
// computes it and advances its virtual clock), so an Event is a plain record, not a handle to wait
// on. Asynchrony comes from the runtime running several devices from several threads. Times are in
// seconds: for the CPU backend on the process-wide steady clock (hw::now_s()), for the emu backend
// on each device's virtual clock, which also starts at 0 and only moves when work is submitted.
#include <cstdint>
#include <string_view>

namespace dype::hw {

// Where a time or energy figure comes from. Every figure an emulated device reports is `modelled`.
enum class TimeSource : std::uint8_t { measured, modelled };

constexpr std::string_view to_string(TimeSource s) {
  return s == TimeSource::measured ? "measured" : "modelled";
}

struct Event {
  double start_s = 0.0;
  double end_s = 0.0;
  TimeSource source = TimeSource::measured;
  // Energy the operation drew on its device above nothing (static + dynamic power over its
  // duration); negative when the device has no power figure.
  double energy_j = -1.0;
  double duration_s() const { return end_s - start_s; }
};

// Seconds since the first call in this process (steady clock): the CPU backend's time base.
double now_s();

}  // namespace dype::hw
