#pragma once
// A kernel's time on c devices of one kind (a pipeline stage, paper Section III-A): the data is
// split, each device runs its share, and the scatter of the dynamic input and the gather of the
// output through the stage's root link are part of the stage time (static data, the graph and the
// weights, is preloaded and costs nothing per request).
//
// Splits: SpMM by rows balanced by nnz (every device needs all of X, so X is broadcast; a single
// heavy row cannot be split, which bounds the balance on power-law graphs); GEMM, softmax and
// layer norm by rows; window attention by heads when there are at least c heads, else by sequence
// chunks with a window/2 halo on each side.
#include "perfmodel/model.h"

namespace dype::perf {

// The link data crosses to reach the c devices of a stage and come back. With a real topology,
// take the aggregate bandwidth of the devices' links (hw::Topology); one root feeds them all.
struct StageLink {
  double bandwidth_bytes_per_s = 31.5e9;  // PCIe 4.0 x16 per direction
  double latency_s = 2e-6;                 // per transfer
};

struct StagePrediction {
  double compute_s = 0;   // slowest device's share
  double scatter_s = 0;   // input distribution (0 on one device)
  double gather_s = 0;    // output collection (0 on one device)
  double total_s = 0;     // scatter + compute + gather
  bool extrapolated = false;
  kernels::OpShape part;  // the largest per-device share
};

// The per-device share of `shape` when split over `devices` (>= 1).
kernels::OpShape split_shape(const kernels::OpShape& shape, int devices);
// Bytes scattered to / gathered from the devices of a stage (0 for one device).
double scatter_bytes(const kernels::OpShape& shape, int devices);
double gather_bytes(const kernels::OpShape& shape, int devices);

// Throws dype::Error when devices < 1.
StagePrediction predict_stage(const KernelModel& model, const kernels::OpShape& shape, int devices,
                              const StageLink& link = {});

}  // namespace dype::perf
