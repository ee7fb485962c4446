#pragma once
// Reading a system file (configs/systems/*.yaml) into a SystemConfig: which devices a box has,
// by backend, with their device model files, sockets, links and power states. A backend is any
// the registry knows (registry.h), compiled into this build or not. Example
// (paper-testbed-pcie4.yaml, abridged):
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
//   transfers [see below]       serial: copies block the device (the paper's timing); overlap:
//   copies
//                               run on the devices' copy engines beside the kernels, one per
//                               direction (emulated devices; the planner then plans with
//                               max(kernels, inbound copies, outbound copies))
//   jitter.sigma [0], jitter.seed [1]   relative std-dev of modelled times (off by default)
//   devices[i].name             unique; devices[i].backend: a name of backend_names() (registry.h)
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
#include <string>

#include "hw/system_config.h"

namespace dype::hw {

// Loads and validates a system file (and the device models and bitstreams it references).
// Throws InputError("<file>: <key path>", problem).
SystemConfig load_system_config(const std::string& path);

}  // namespace dype::hw
