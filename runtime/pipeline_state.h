#pragma once
// The Pipeline's inner state (pipeline.h only names these types): what each stage and each of
// its devices hold, and one request's work in flight. Shared by pipeline.cpp (the workers, the
// lifecycle) and pipeline_stage.cpp (what a stage does with a request).
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "hw/buffer.h"
#include "hw/device.h"
#include "runtime/observer.h"
#include "runtime/pipeline_spec.h"
#include "runtime/transfer.h"

namespace dype::rt {

// A zero-size or size-only copy still needs a valid pointer: this one.
alignas(64) inline std::byte g_pipeline_sink[64];

inline std::span<const std::byte> bytes_or_size(const void* data, std::size_t bytes,
                                                bool size_only) {
  if (size_only || data == nullptr) return {g_pipeline_sink, bytes};
  return {static_cast<const std::byte*>(data), bytes};
}

namespace pipeline_state {

// A device's slice of a graph: rows [r0, r1) in CSR.
struct GraphRows {
  std::uint64_t graph_id = 0;
  std::int64_t r0 = 0, r1 = 0, nnz = 0;
  hw::BufferPtr indptr, indices, values;
};

// The rows a device holds, shared by its stages of every round: a stage takes a reference for the
// request it runs, so another round's stage may place a new graph meanwhile.
struct GraphSlot {
  std::mutex mu;
  std::shared_ptr<GraphRows> rows;
};

struct DeviceState {
  hw::Device* dev = nullptr;
  std::vector<std::vector<hw::BufferPtr>> weights;  // [step - first] -> W, bias (x3 for qkv)
  std::shared_ptr<GraphSlot> slot;
  std::shared_ptr<GraphRows> graph;  // the rows this stage's current request uses
};

struct StageState {
  int index = 0;
  PipelineStage spec;
  std::vector<DeviceState> devs;
  bool has_spmm = false;
  std::string names;
  double execute_w = 0.0;  // its devices' execute power for its kernels (RequestEvent)
  // Requests this stage's worker has taken (worker only) and has issued every operation of,
  // its outgoing transfer included (read by the stage before it, under issue_mu).
  std::uint64_t taken = 0;
  std::mutex issue_mu;
  std::condition_variable issue_cv;
  std::uint64_t issued = 0;
  std::mutex part_mu;  // the row split cache: read by this stage and by the one before it
  std::uint64_t part_graph = 0;
  std::int64_t part_rows = -1;
  std::vector<std::int64_t> part;
  mutable std::mutex mu;  // guards stats and dead
  StageStats stats;
  double start_wall_s = 0.0;
  double end_wall_s = -1.0;
  std::string dead_device, dead_reason;
  double depth_sum = 0.0;
};

struct Work {
  Job job;
  Activation act;
  // The activation in host memory, on its way to or from a remote stage.
  std::vector<HostTensor> host;
  Completion c;
  bool failed = false;
  std::vector<KernelTiming> timings;  // this stage's launches (only when observers listen)
};

}  // namespace pipeline_state

}  // namespace dype::rt
