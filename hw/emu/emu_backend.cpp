#include "hw/emu/emu_backend.h"

#include "hw/emu/emu_device.h"
#include "common/error.h"

namespace dype::hw {

Backend emu_backend() {
  Backend b;
  b.name = "emu";
  b.create = [](const DeviceConfig& dc, const SystemConfig& sys) -> DevicePtr {
    if (!dc.profile) throw InputError(sys.file + ": " + dc.key_path + ".model", "emu devices need a device model");
    DeviceInfo info;
    info.name = dc.name;
    info.kind = dc.profile->kind;
    info.product = dc.profile->product + " (emulated)";
    info.backend = "emu";
    info.memory_bytes = dc.profile->memory_bytes;
    info.time_source = TimeSource::modelled;
    info.power = dc.power;
    EmuOptions opt;
    opt.timing_only = dc.timing_only;
    opt.overlap_copies = sys.overlap_transfers;
    opt.jitter_sigma = sys.jitter_sigma;
    // Each device its own stream, reproducible from the system seed.
    opt.jitter_seed = sys.jitter_seed * 1000003ULL + std::hash<std::string>{}(dc.name);
    auto dev = std::make_unique<EmuDevice>(std::move(info), *dc.profile, opt);
    if (dc.bitstream) {
      dev->load_bitstream(*dc.bitstream);
      dev->reset_clock();  // configured before the system starts: not on the timeline
    }
    return dev;
  };
  b.detect = [] { return std::vector<DeviceConfig>{}; };
  return b;
}

}  // namespace dype::hw
