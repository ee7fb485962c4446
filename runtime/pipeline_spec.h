#pragma once
// What a pipeline (pipeline.h) is given and gives back, as plain values: the stages it runs
// (PipelineSpec, what the planner makes), one request's Job and its Completion, and a stage's
// statistics. The executor's inner state (pipeline_state.h) builds on these, not on the executor.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hw/device.h"
#include "runtime/model.h"
#include "runtime/stage_link.h"
#include "runtime/transfer.h"

namespace dype::rt {

struct PipelineStage {
  int first = 0;  // kernels [first, last] of the model
  int last = 0;
  std::vector<hw::Device*> devices;
  double predicted_s = 0.0;  // the plan's stage time (modelled), for observability
  // Set for a stage on another host (stage_link.h): the stage's activation reaches it, and
  // leaves it, through host memory. `devices` may name the planner's stand-ins for the other
  // host's devices (hw::SystemConfig::hosts); nothing runs on them here.
  std::shared_ptr<StageLink> remote{};
};

struct PipelineSpec {
  std::vector<PipelineStage> stages;
  std::string label;  // "2G|1F" or the scheduler's mnemonic
  // Layer-recurrent pipelines (scheduler/recurrent.h): the stages are `rounds` rounds of
  // stages.size() / rounds stages each; round r's stage s runs on round 0's stage s devices, its
  // kernels shifted by r x (kernels per round). A request makes the rounds in order, so a device
  // serves its stage of every round (the plan's hand-off from the last stage back to the first is
  // the transfer between rounds). 1: flat, every device in one stage.
  int rounds = 1;
  // The kernels the stages cover: the whole model (0 .. last), or a part of it for a host that
  // runs some stages of another host's pipeline (Job::inputs, Completion::tensors). -1: the
  // model's last kernel.
  int first_kernel = 0;
  int last_kernel = -1;
  int stages_per_round() const { return static_cast<int>(stages.size()) / std::max(rounds, 1); }
};

// "0-1:gpu0+gpu1 | 2-3:b/fpga0" (a remote stage is named by its link's where())
std::string describe(const PipelineSpec& spec);
// One stage's devices, "gpu0+gpu1", or its link's where() for a remote stage.
std::string device_names(const PipelineStage& stage);

struct Completion {
  std::uint64_t seq = 0;
  std::uint64_t epoch = 0;
  HostTensor output;
  std::exception_ptr error;    // set when the request failed
  std::string failed_device;   // the device a DeviceError named, "" otherwise
  double modelled_end_s = -1;  // virtual time the result reached the host (emulated devices)
  std::vector<double> stage_modelled_s;  // per stage, modelled busy time of this request (-1: none)
  std::vector<double> stage_wall_s;      // per stage, measured
  // A pipeline that ends before the model's last kernel: every tensor its last kernel hands on
  // (`output` stays empty).
  std::vector<HostTensor> tensors{};
};

struct Job {
  std::uint64_t seq = 0;
  std::shared_ptr<const Request> request;
  double not_before_s = 0.0;  // virtual time the input exists (modelled devices)
  // A pipeline that starts after the model's first kernel: the tensors its first kernel reads
  // (whole), instead of the request's input.
  std::vector<HostTensor> inputs{};
  std::function<void(Completion&&)> done;
};

struct StageStats {
  std::string devices;
  std::int64_t requests = 0;
  std::int64_t failed = 0;
  double busy_s = 0.0;      // measured wall time spent processing
  double lifetime_s = 0.0;  // measured since the worker started
  double idle_s() const { return lifetime_s > busy_s ? lifetime_s - busy_s : 0.0; }
  double modelled_busy_s = 0.0;  // sum of modelled per-request stage times
  double predicted_s = 0.0;      // per request, from the plan (modelled)
  std::int64_t max_queue_depth = 0;
  double mean_queue_depth = 0.0;
  TransferCounters transfers;
};

}  // namespace dype::rt
