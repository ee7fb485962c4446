#pragma once
// SystemConfig: which devices a box has, by backend, with their device models, sockets, links,
// power states and hosts. system_file.h reads one from a system file (configs/systems/*.yaml);
// registry.h's detect_system_config() builds one from the devices present.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hw/detected_profile.h"
#include "hw/device.h"
#include "hw/device_profile.h"
#include "hw/topology.h"

namespace dype::hw {

struct DeviceConfig {
  std::string name;
  std::string host;        // hosts[i].name ("" when the system lists no hosts)
  std::string backend;     // one of backend_names() (hw/registry.h)
  std::string profile_file;  // resolved path of devices[i].model, "" when none
  std::optional<DeviceProfile> profile;
  DeviceKind kind = DeviceKind::cpu;  // from the model (cpu when the backend is cpu)
  int socket = 0;
  Link link;
  bool p2p = false;
  std::string bitstream_file;  // resolved path, "" when none
  std::optional<Bitstream> bitstream;
  bool timing_only = false;
  int threads = 0;             // cpu backend: 0 = all hardware threads
  bool schedulable = true;
  PowerStates power;           // effective power states (model, then kind override, then device)
  std::string key_path;        // "devices[3]", for later error messages
  int ordinal = 0;             // backend-specific device index (real backends)
  int copy_engines = 0;        // real GPUs: async copy engines reported (0: not reported)
  std::string no_profile_why;  // a real accelerator left without a profile: what was missing
};

// A machine of a multi-host system and its NIC (modelled figures for the planner).
struct HostConfig {
  std::string name = "";
  // HOST:PORT of its stage server; "" for hosts[0], the coordinator, and for a host that joins
  // (dype-serve --join: it reports its address, and is left out of plans until it does).
  std::string address = "";
  double nic_bytes_per_s = 12.5e9;
  double nic_latency_s = 3e-6;
};

struct SystemConfig {
  std::string file;  // "" for a detected system
  std::string name;
  std::string description;
  int sockets = 1;
  double inter_socket_bytes_per_s = 128e9;
  bool timing_only = false;
  // `transfers: serial | overlap`: whether copies block a device's kernels (the paper's timing,
  // which its testbed files state for reproduction) or run on the devices' copy engines beside
  // them, one per direction. Unstated: what the devices can do, overlap when the accelerators are
  // emulated (beside the CPU), serial when a CUDA, HIP or XRT device is there (the GPU backends
  // copy on their own streams, one per direction, but how far that overlaps on real hardware is not
  // measured yet: bench_gpu_overlap) or the CPU is alone.
  bool overlap_transfers = false;
  bool transfers_stated = false;  // the file said `transfers:`; otherwise settle_transfers decides
  std::string transfers_why;      // why overlap_transfers is what it is, for logs and the admin API
  double jitter_sigma = 0.0;
  std::uint64_t jitter_seed = 1;
  std::vector<DeviceConfig> devices;
  std::map<std::string, std::string> baseline_op_kind;  // op name -> device kind name
  std::vector<int> baseline_static_counts;

  // hosts[0] is this machine (the coordinator); empty: one host.
  std::vector<HostConfig> hosts;

  const DeviceConfig* find(const std::string& device_name) const;
  // The host `device_name` is on when that is not this machine; "" for a local device.
  std::string remote_host(const std::string& device_name) const;
  const HostConfig* find_host(const std::string& host_name) const;
  // Its index in hosts (0 also for a name not there: the coordinator's devices).
  int host_index(const std::string& host_name) const;
  // The devices placed on `host_name`, in file order.
  std::vector<std::string> devices_on(const std::string& host_name) const;
};

// Whether `address` has the HOST:PORT shape of a stage server address (both parts non-empty).
bool is_host_port(const std::string& address);

// Gives `d` the profile derived from `attributes` (hw/detected_profile.h) with its power and, unless
// `keep_link`, its host link; records the copy engines. When the attributes cannot make a profile
// the device keeps none and no_profile_why says what was missing.
void apply_detected_profile(DeviceConfig& d, const AcceleratorAttributes& attributes, bool keep_link = false);

// Decides overlap_transfers when the file did not state it, from what the devices can do: overlap
// when the accelerators are emulated, or are real GPUs that each report at least two copy engines
// (one per direction beside the kernels; bench_gpu_overlap measured 91.5-97.4% of copies hidden on
// an H200); serial when the CPU is alone, an FPGA is real (XRT copies are not overlapped), or a GPU
// reports fewer engines. transfers_why names the cause.
void settle_transfers(SystemConfig& config);

// The repository's configs/ folder: $DYPE_CONFIG_DIR, else ./configs, else the source tree's.
std::string default_config_dir();

}  // namespace dype::hw
