#pragma once
// The profiler (paper Section V): synthetic inputs over the workloads' ranges, each timed on a
// hw::Device through Device::launch (warm-up, repetitions, outlier rejection, median), within a
// wall-clock budget, then fitted into a ModelStore. Emulated devices go through exactly the same
// path: their device model plays the hardware and their Events' modelled durations are the
// "measurements", so the scheduler always plans on fitted models, never on the ground truth.
//
//   auto sys = hw::System::from_config(hw::load_system_config("configs/systems/local.yaml"));
//   ProfileOptions opt;
//   opt.kernels = {OpKind::spmm, OpKind::gemm, OpKind::window_attention};
//   opt.budget_s = 180;
//   ModelStore store = profile_device(sys.device("cpu0"), "generic-cpu", opt);
//   store.save(ModelStore::default_path(DYPE_SOURCE_DIR, store.device_model));
#include <functional>
#include <string>
#include <vector>

#include "hw/device.h"
#include "hw/kernel_launch.h"
#include "common/csr.h"
#include "perfmodel/model_store.h"
#include "perfmodel/synthetic.h"
#include "perfmodel/timing.h"

namespace dype::perf {

DeviceClass device_class_of(hw::DeviceKind kind);

// Feature constants for a device: cache sizes and SIMD width of this CPU for the cpu backend,
// the loaded bitstream's design parameters for an emulated FPGA, defaults otherwise.
FeatureParams feature_params_for(const hw::Device& device);

// Ranges and cost caps used for profiling a kernel on a device class. Measured devices only get
// shapes that fit in memory and run in a fraction of a second; modelled ones span the full ranges
// in timing-only mode.
SyntheticRanges default_ranges(DeviceClass cls, kernels::OpKind kind, bool modelled);

struct ProfileProgress {
  kernels::OpKind kind;
  int point = 0;              // 1-based index of the point just timed
  int max_points = 0;
  double kernel_elapsed_s = 0;
  double kernel_budget_s = 0;
  double total_elapsed_s = 0;
  double total_budget_s = 0;
  const Sample* sample = nullptr;
  const TimingResult* timing = nullptr;
};

// What a "measurement" on a measured CPU is. Wall time is what a dedicated machine shows; on a
// shared, oversubscribed machine (other jobs compiling) wall time mostly measures the scheduler.
// Process CPU time divided by the device's thread count is the contention-free equivalent: the
// time the kernel takes when its threads have the cores to themselves (TBB workers sleep when
// idle, so waiting does not count). Emulated devices always use their modelled event time.
enum class ProfileClock : std::uint8_t { wall, cpu_time };

struct ProfileOptions {
  ProfileClock clock = ProfileClock::cpu_time;
  std::vector<kernels::OpKind> kernels = {kernels::OpKind::spmm, kernels::OpKind::gemm,
                                          kernels::OpKind::window_attention};
  double budget_s = 120;   // wall clock for everything, fitting included
  int max_points = 1000;   // per kernel
  // SpMM: each materialised graph is timed at this many feature lengths (its spec's and others
  // drawn over the same range within the caps). Building a graph takes far longer than timing it
  // on a GPU, so one per graph left a 60 s GPU profile with 81 SpMM points. 1: one per graph.
  int spmm_widths_per_graph = 3;
  std::uint64_t seed = 1;
  TimingPolicy timing;
  FitOptions fit;
  // Overrides default_ranges() when set (caps, ranges).
  std::function<SyntheticRanges(DeviceClass, kernels::OpKind, bool modelled)> ranges;
  std::function<void(const ProfileProgress&)> on_progress;
};

// Times synthetic points of one kernel until `budget_s` is spent or max_points are done.
std::vector<Sample> collect_samples(hw::Device& device, kernels::OpKind kind,
                                    const ProfileOptions& options, double budget_s,
                                    double total_elapsed_s = 0);

// Profiles every kernel in options.kernels that the device supports and fits models. The store's
// provenance is "modelled" when the device's times are modelled. Throws dype::Error when a kernel
// got too few samples in its share of the budget to fit.
ModelStore profile_device(hw::Device& device, const std::string& device_model,
                          const ProfileOptions& options);

// Times one SpMM of a given (e.g. real) matrix with n feature columns on the device.
TimingResult time_spmm(hw::Device& device, const kernels::CsrI32& a, std::int64_t n,
                       const TimingPolicy& policy = {}, ProfileClock clock = ProfileClock::cpu_time);

// Runs a launch once and returns its time under `clock` (see ProfileClock).
double timed_launch(hw::Device& device, const hw::KernelLaunch& launch, ProfileClock clock);

}  // namespace dype::perf
