#pragma once
// System configs (configs/systems/*.yaml): which devices a box has, by backend, with their device
// model files, sockets, links and power states. Example (paper-testbed-pcie4.yaml, abridged):
//
//   system: {name: paper-testbed-pcie4, description: "2 x MI210 + 3 x U280, PCIe 4.0"}
//   topology: {sockets: 2, inter_socket_gbps: 128}
//   devices:
//     - {name: cpu0, backend: cpu, model: devices/amd-epyc-7v13.yaml, socket: 0}
//     - {name: gpu0, backend: emu, model: devices/amd-mi210.yaml, socket: 0,
//        link: {type: pcie, generation: 4, lanes: 16}, p2p: true}
//     - {name: fpga0, backend: emu, model: devices/xilinx-u280.yaml, socket: 1,
//        bitstream: bitstreams/u280-sextans-swat.yaml, link: {type: pcie, generation: 4, lanes: 8}}
//
// Keys (defaults in brackets):
//   system.name, system.description [""]
//   topology.sockets [1], topology.inter_socket_gbps [128] (GB/s, per direction)
//   timing_only [false]         every emulated device skips arithmetic (size-only buffers)
//   transfers [see below]       serial: copies block the device (the paper's timing); overlap: copies
//                               run on the devices' copy engines beside the kernels, one per
//                               direction (emulated devices; the planner then plans with
//                               max(kernels, inbound copies, outbound copies))
//   jitter.sigma [0], jitter.seed [1]   relative std-dev of modelled times (off by default)
//   devices[i].name             unique; devices[i].backend: cpu|emu|cuda|hip|xrt
//   devices[i].model            device model file, relative to the system file's folder or its
//                               parent (configs/); required for emu, optional otherwise
//   devices[i].socket [0], devices[i].p2p [false], devices[i].link.{type pcie|cxl, generation,
//   lanes 1|2|4|8|16} [the model's link], devices[i].bitstream [none] (FPGA),
//   devices[i].timing_only [system value], devices[i].threads [0 = all cores] (cpu),
//   devices[i].schedulable [true; false for cpu] whether the scheduler may place kernels there,
//   devices[i].power.{idle_w, execute_w, transfer_w} [the model's power]
//   power.<cpu|gpu|fpga>.{idle_w, execute_w, transfer_w}  per-kind overrides for every device of
//                               that kind (device-level power wins)
//   baselines.op_kind.<op> [none]   device kind the `static`/`fleetrec` baseline plans pin an op to
//   baselines.static_counts [even split]  devices per stage of the `static` baseline
//   hosts [none: one host]      machines the system spans (issue 20): hosts[i].name,
//                               hosts[i].address HOST:PORT (where its stage server listens;
//                               required except for hosts[0], the coordinator: this machine),
//                               hosts[i].nic_gbit_per_s [100], hosts[i].nic_latency_us [3]
//   devices[i].host [hosts[0]]  the machine the device is in; a device on another host is planned
//                               from its model file (required) and runs there, reached through
//                               that host's stage server (runtime/remote/)
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
  std::string backend;     // cpu, emu, cuda, hip, xrt
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

// Loads and validates a system file (and the device models and bitstreams it references).
// Throws InputError("<file>: <key path>", problem).
SystemConfig load_system_config(const std::string& path);

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
