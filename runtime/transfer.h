#pragma once
// The transfer engine: moves one request's activations (row-partitioned FP32 tensors held on the
// devices of a stage) to where the next kernel needs them.
//
// An Activation is a list of tensors with the same rows (Q, K, V after the QKV kernel; one tensor
// otherwise), split into shards: shard j lives on one device, holds rows [held_lo, held_hi) and is
// authoritative for rows [own_lo, own_hi) (a window-attention halo makes held wider than own).
// A Need says which rows a device must hold next. Paths:
//  - the need is exactly what a shard on the same device holds: the buffers move, nothing copies;
//  - a row-local need that is exactly a whole shard elsewhere: one Device::copy_to_peer (P2P when
//    the topology allows it, host-staged otherwise; emulated devices advance both virtual clocks
//    by the modelled time, a transfer occupying both ends as in the paper's Section III-B);
//  - needs wider than the rows a device will own (an SpMM's every row, a window attention's halo):
//    the route handoff_route.h picks from the topology, a host relay or direct peer copies of
//    each source's rows into each destination's buffer (the planner costs the same choice);
//  - anything else (a re-split of row-local data): the owned rows go to host memory once, then
//    each device receives the rows it needs.
// Timing-only (size-only) data is moved by size only: only timing-only emulated devices take it.
#include <cstdint>
#include <span>
#include <vector>

#include "hw/device.h"
#include "runtime/model.h"

namespace dype::rt {

struct Shard {
  hw::Device* device = nullptr;
  std::vector<hw::BufferPtr> tensors;  // each [held_hi - held_lo, cols[t]]
  std::int64_t held_lo = 0, held_hi = 0;
  std::int64_t own_lo = 0, own_hi = 0;
  // Rows whose values are right: all held rows after a transfer, only the owned ones after a
  // window attention computed over a halo (its edge rows saw a truncated window).
  std::int64_t valid_lo = 0, valid_hi = 0;
  std::int64_t held_rows() const { return held_hi - held_lo; }
  bool fully_valid() const { return valid_lo <= held_lo && valid_hi >= held_hi; }
};

struct Activation {
  std::int64_t rows = 0;
  std::vector<std::int64_t> cols;  // one per tensor
  std::vector<Shard> shards;       // owned ranges disjoint, covering [0, rows)
  bool size_only = false;
};

struct Need {
  hw::Device* device = nullptr;
  std::int64_t lo = 0, hi = 0;          // rows to hold
  std::int64_t own_lo = 0, own_hi = 0;  // rows it will be authoritative for
};

struct TransferCounters {
  std::int64_t p2p_copies = 0;
  std::int64_t staged_copies = 0;  // device<->host legs
  std::int64_t moves = 0;          // buffers handed over without copying
  double bytes = 0.0;
};

// True for emulated devices in timing-only mode (they accept size-only data).
bool timing_only(const hw::Device& device);

class TransferEngine {
 public:
  // Host tensor -> devices. `not_before_s`: virtual time the input exists (modelled devices).
  Activation upload(const HostTensor& x, const std::vector<Need>& needs, double not_before_s,
                    TransferCounters& counters) const;
  // Several host tensors with the same rows (an activation that arrived from another host:
  // Q, K, V, a carried skip tensor) -> devices, one buffer per tensor on each device.
  Activation upload(std::span<const HostTensor> xs, const std::vector<Need>& needs, double not_before_s,
                    TransferCounters& counters) const;
  // A request's x -> devices. Features left in GPU memory (Request::device_input) are copied in
  // place on the GPU that holds them (hw::Device::copy_from_ipc_memory, counted as a peer copy:
  // no host leg); any other device gets them from their host copy (Request::input, read once).
  // Mapped features (Request::mapped_input) are used where they lie by devices whose kernels read
  // host memory (hw::Device::borrow_host: the CPU, counted as a move), and copied from there to
  // any other. Whether their memory shrank meanwhile is asked once the pipeline has read them
  // (Pipeline, after the last stage), which refuses the request then.
  Activation upload_input(const Request& request, const std::vector<Need>& needs,
                          double not_before_s, TransferCounters& counters) const;
  // Re-shard `from` so each need is met; consumes `from`.
  Activation redistribute(Activation&& from, const std::vector<Need>& needs,
                          TransferCounters& counters) const;
  // Owned rows of every shard of tensor 0 -> one host tensor. `modelled_end_s` gets the latest
  // modelled event end (or stays as is when no device is modelled).
  // With `into` (the request's AnswerMemory, room enough): the rows go there instead, it is marked
  // written, and the tensor returned is shape-only.
  HostTensor download(const Activation& act, TransferCounters& counters, double& modelled_end_s,
                      const AnswerMemory* into = nullptr) const;
  // Every tensor of `act` (owned rows) -> host tensors, in the activation's order: what a stage
  // hands to a stage on another host.
  std::vector<HostTensor> download_all(const Activation& act, TransferCounters& counters,
                                       double& modelled_end_s) const;
  // Whether the shards already satisfy the needs (same device, rows held, same ownership).
  static bool satisfied(const Activation& act, const std::vector<Need>& needs);

 private:
  void copy_whole_shards(const Activation& from, Activation& out, const std::vector<Need>& needs,
                         std::vector<bool>& done, TransferCounters& counters) const;
  void relay_through_host(const Activation& from, Activation& out, const std::vector<Need>& needs,
                          std::vector<bool>& done, TransferCounters& counters) const;
};

}  // namespace dype::rt
