#pragma once
// The device kinds the runtime's planner hands the scheduler. The scheduler treats the devices of
// a kind as identical, so FPGAs that hold different images are different kinds: when the
// schedulable FPGAs do not all hold the same image, the FPGA kind is split per image
// ("fpga:u280-sextans-swat", letter F), each kind timed on its first device. When they all hold
// the same image the kind stays "fpga", as plans and mnemonics always named it.
//
// Image choice asks "what if": an FpgaImagePlan gives the image some FPGAs would hold; those kinds
// are then timed from the manifests (hw::timing::modelled_time_s on the board's device model) and
// their power is the board's idle power plus the kernel's dynamic power (paper Table II).
//
//   for (const rt::PlanningKind& k : rt::planning_kinds(system, drained)) ...
//   rt::planning_kind_name(system, *fpga0)   // "fpga" or "fpga:u280-sextans-gemm"
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hw/device_profile.h"
#include "hw/system.h"

namespace dype::rt {

// FPGA name -> the image it would hold (a manifest owned by the caller).
using FpgaImagePlan = std::map<std::string, const hw::Bitstream*>;

struct PlanningKind {
  std::string name;                   // "gpu", "fpga", "fpga:<image>", "cpu"
  hw::DeviceKind kind = hw::DeviceKind::cpu;
  std::vector<hw::Device*> devices;   // usable ones (schedulable, not excluded), in system order
  // Set when the kind's image is not the one its devices hold now (image choice): times and
  // power come from this manifest on `board`.
  const hw::Bitstream* manifest = nullptr;
  const hw::DeviceProfile* board = nullptr;
};

// Whether `d` may be planned: not excluded, and schedulable in the system file.
bool usable(const hw::System& system, const hw::Device* d, const std::set<std::string>& excluded);

// The image `d` holds, or would hold under `images`; "none" without one; "" for devices that
// are not reconfigurable.
std::string image_name(const hw::Device& d, const FpgaImagePlan* images = nullptr);

// The kind name `d` is planned under (see above); a device on another host of the system
// (hw::SystemConfig::hosts) gets "@<host>" ("gpu@b", "fpga:u280-sextans-swat@b").
// The kind name `d` is planned under (see above). Whether the FPGA kind is split does not depend
// on which devices are excluded, so a pipeline keeps its kind names across drains.
std::string planning_kind_name(const hw::System& system, const hw::Device& d, const FpgaImagePlan* images = nullptr);

// The device kind a planning kind name stands for ("fpga:x@b" -> fpga; Error when unknown), and
// the host it is on ("" for this machine).
hw::DeviceKind device_kind_of(const std::string& kind_name);
std::string host_of_kind(const std::string& kind_name);

// GPU kinds, then FPGA kinds (by image name when split), then the CPU; kinds without usable
// devices are left out.
std::vector<PlanningKind> planning_kinds(const hw::System& system, const std::set<std::string>& excluded,
                                         const FpgaImagePlan* images = nullptr);

}  // namespace dype::rt
