#pragma once
// The scheduler's view of a machine: device kinds with counts, power states and a link model.
// Deliberately narrow (numbers only) so that adapters from hw::Topology / system YAML files can
// fill it; the scheduler never touches a device. A system may span hosts (SystemSpec::hosts): each
// kind lives on one host, and a hand-off between kinds on different hosts crosses their NICs.
//
//   dype::sched::SystemSpec sys = dype::sched::paper_testbed();      // 3 x U280 + 2 x MI210
//   double x = sys.transfer_time_s(4e6, {fpga, 3}, {gpu, 2});        // seconds, modelled
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/op.h"

namespace dype::sched {

// Watts drawn per device in each state. The cost model needs exec >= idle and xfer >= idle (idle
// is the floor a powered device always draws); validate() enforces it.
struct PowerStates {
  double idle_w = 0.0;
  double exec_w = 0.0;
  double xfer_w = 0.0;
};

struct DeviceKindSpec {
  std::string name;        // "gpu", "fpga", "cpu", or any other kind
  char letter = '?';       // mnemonic letter: G, F, C, ...
  int count = 0;           // devices of this kind available to the scheduler
  PowerStates power;
  double link_bw_bytes_per_s = 0.0;  // per device host link (PCIe x16 4.0 ~ 31.5e9); memory bw for host kinds
  double link_latency_s = 0.0;       // fixed cost per transfer hop
  int socket = 0;                    // root complex the devices hang off
  bool p2p = false;                  // can DMA directly to/from other p2p-capable devices
  bool host = false;                 // lives in host memory (CPU kind): transfers to it are one hop
  double memory_bytes = 0.0;         // per device; 0 = not limited (what a stage holds must fit, cost_model.h)
  // Optional effective throughput per op (GFLOP/s per device) for AnalyticCostModel; 0 = op not
  // supported on this kind. Indexed by kernels::OpKind.
  std::array<double, 5> gflops{};
  // The host the devices are on (index into SystemSpec::hosts; 0 = the first, the coordinator).
  // A kind lives on one host: GPUs on two hosts are two kinds ("gpu" and "gpu@b", each its letter).
  int host_index = 0;
};

// One machine of a multi-host system: its NIC, through which every hand-off to or from another
// host passes (the UCX data plane, runtime/remote/). Figures are the config's (modelled).
struct HostSpec {
  std::string name;
  double nic_bw_bytes_per_s = 0.0;  // one direction (NICs are full duplex)
  double nic_latency_s = 0.0;       // per message, at each end
};

// c devices of kind `kind` (indices into SystemSpec::kinds).
struct DeviceGroup {
  int kind = 0;
  int count = 1;
};

// How a stage's transfers share its time with its compute. serial: the paper's conflict-avoiding
// timing (Section II-B), a stage is busy for X_in + C + X_out. overlap: copies run on the devices'
// copy engines while the kernels of the next request run, one engine per direction (links are full
// duplex), so a stage's period is the largest of its kernels, its inbound copies with X_in and its
// outbound copies with X_out, the copies of one device in one direction counted together (they
// share that direction of its link and engine); CostTables::stage_time has the whole formula.
enum class TransferMode : std::uint8_t { serial, overlap };
std::string_view to_string(TransferMode mode);

struct SystemSpec {
  std::string name;
  TransferMode transfers = TransferMode::serial;
  std::vector<DeviceKindSpec> kinds;
  // Empty: one host (every kind's host_index 0, no NIC). Otherwise hosts[0] is the coordinator:
  // the request arrives there and the answer leaves from there.
  std::vector<HostSpec> hosts;
  double inter_socket_bw_bytes_per_s = 128e9;  // paper Section III-A: 128 GB/s between the CPUs
  // Baselines. static_kind[op] / fleetrec: the kind each op is pinned to (-1 = not pinned).
  std::array<int, 5> op_kind{-1, -1, -1, -1, -1};
  // Static baseline: devices per stage, stages formed by consecutive kernels of one pinned kind.
  std::vector<int> static_counts;

  int kind_index(std::string_view name) const;  // -1 when absent
  int host_index(std::string_view name) const;  // -1 when absent
  // Kind `kind`'s host name ("" when the system lists no hosts).
  std::string host_name(int kind) const;
  // Where a kind runs, as plans print it: "host:kind" ("kind" when the system lists no hosts).
  std::string where(int kind) const;
  int total_devices() const;
  // Throws InputError naming the kind and field when the spec cannot be used.
  void validate(const std::string& where = "system") const;

  // f_comm: time to move `bytes` from the group `from` to the group `to` (Section II-B/III-B).
  // Transfers never overlap each other, so the time is the bandwidth-bound copy time (whether it
  // also blocks compute is `transfers`, applied where a stage's time is put together):
  //  - P2P (both kinds p2p-capable): one hop at the aggregate bandwidth of the devices involved,
  //    min(c_a * bw_a, c_b * bw_b), capped by the inter-socket link when the sockets differ;
  //  - a host kind on either side: one hop at the device side's aggregate bandwidth;
  //  - otherwise staged through host memory: device->host then host->device, serially, plus the
  //    inter-socket hop when the sockets differ.
  //  - kinds on different hosts: staged through both hosts' memory, one leg after the other:
  //    device -> its host (the sender's aggregate link and latency; nothing for a host kind),
  //    the NIC hop (nic_time_s), remote host -> device (the receiver's, likewise). The NIC is one
  //    per host: the c devices of a group share it (no aggregate), and in overlap mode the hop
  //    counts on the sender's outbound side and the receiver's inbound side like any hand-off.
  double transfer_time_s(double bytes, DeviceGroup from, DeviceGroup to) const;
  // The NIC hop between hosts a and b: both latencies + bytes at the slower NIC; 0 when a == b.
  double nic_time_s(double bytes, int host_a, int host_b) const;
  // The request's input arriving at the coordinator (hosts[0]) and sent on to a first stage of
  // kind `kind`, and the answer sent back from a last stage of it: the NIC hop when the kind is
  // on another host, else 0 (on one host the input is resident where stage 1 runs, plan.h).
  double host_input_time_s(double bytes, int kind) const { return nic_time_s(bytes, 0, kinds[kind].host_index); }
  double host_output_time_s(double bytes, int kind) const { return nic_time_s(bytes, kinds[kind].host_index, 0); }
};

// The DyPe paper's testbed (Section III-A, Table II): 3 x Alveo U280 (PCIe 4.0 x8, socket 1),
// 2 x MI210 (PCIe 4.0 x16, socket 0), FPGA-GPU P2P, 128 GB/s between sockets. When with_cpu, the
// host CPU is a third kind. Figures are modelled.
SystemSpec paper_testbed(bool with_cpu = false);

// Parses a system YAML in the scheduler's own format (`kinds:`, optional `hosts:`; format in
// scheduler/system.cpp). Errors name the file and key.
SystemSpec load_system_spec(const std::string& path);
SystemSpec parse_system_spec(const std::string& yaml_text, const std::string& source);

}  // namespace dype::sched
