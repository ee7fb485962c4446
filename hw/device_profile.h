#pragma once
// Device profiles (configs/devices/*.yaml, the `model:` of a system file's device) and FPGA
// bitstream manifests (configs/bitstreams/*.yaml): the numbers the emu backend times kernels with,
// and the power states every cost model uses. hw/kernel_timing_model.h documents the formulas that
// consume them. "Profile" here, because "model" already names the served model (rt::Model) and
// the fitted performance models (perf::KernelModel); a device's product name is
// DeviceInfo::product.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw/device.h"
#include "hw/power.h"
#include "hw/topology.h"
#include "common/op.h"

namespace dype::hw {

// Roofline parameters of one op on a GPU-like (or CPU-like) device.
struct OpModelParams {
  double compute_efficiency = 0.7;  // fraction of peak FP32 FLOP/s a large, regular shape reaches
  double memory_efficiency = 0.8;   // fraction of peak memory bandwidth
  double launch_overhead_s = 5e-6;  // per kernel launch (window attention: per kernel of three)
  double skew_penalty = 0.0;        // spmm: bandwidth / (1 + skew_penalty * log2(degree_skew))
  // spmm, wavefront-per-row CSR kernels (hw/kernel_timing_model.h); 0 leaves a term out.
  double wavefront = 0.0;         // lanes per pass over a row's output columns
  double row_latency_s = 0.0;     // dependent-load chain of one row pass (row pointers, LDS, store)
  double concurrent_rows = 0.0;   // row passes in flight device-wide (wavefront slots)
  double gather_bytes = 0.0;      // transaction size a dense-row gather is rounded up to
};

// Where a profile's numbers come from: a file (configs/devices/*.yaml), a detected device's
// attributes plus the known-products table (hw/detected_profile.h), or its attributes alone.
enum class ProfileSource : std::uint8_t { file, known_product, detected };
std::string_view to_string(ProfileSource source);

struct DeviceProfile {
  std::string file;         // where it was loaded from ("" when built in code)
  ProfileSource source = ProfileSource::file;
  std::string estimated;    // detected profiles: the numbers that are assumptions, "" when none
  std::string id;           // "amd-mi210"
  std::string product;      // "AMD Instinct MI210"
  DeviceKind kind = DeviceKind::gpu;
  std::size_t memory_bytes = 0;
  std::string memory_type;  // "HBM2e"
  double memory_bandwidth_bytes_per_s = 0.0;
  double peak_fp32_flops = 0.0;
  double cache_bytes = 0.0;      // last-level cache: how much of an SpMM's dense operand is reused
  double saturation_outputs = 0.0;  // GEMM outputs (m*n) needed to fill the device (occupancy)
  Link link;                    // default host link (a system config may override)
  PowerStates power;
  std::map<kernels::OpKind, OpModelParams> ops;  // GPU/CPU: the ops it runs; FPGA: empty
};

// One kernel of an FPGA bitstream with its performance-model parameters.
struct BitstreamKernel {
  kernels::OpKind op = kernels::OpKind::spmm;
  std::string design;       // "sextans", "swat", "systolic_gemm"
  double scale_c = 1.0;     // the paper's fitted scaling factor C
  double frequency_mhz = 0.0;
  int mac_units = 0;        // sextans: N_M
  double pipeline_cycles = 0.0;  // swat: t_pipeline per token
  double init_cycles = 0.0;      // swat: t_init
  double peak_flops = 0.0;       // systolic_gemm
  double efficiency = 1.0;       // systolic_gemm
  double launch_overhead_s = 0.0;
  double dynamic_w = 0.0;        // power above idle while this kernel runs
};

struct Bitstream {
  std::string file;
  std::string name;
  std::string profile_id;  // the board it is built for (DeviceProfile::id; key device_model)
  double load_time_s = 0.0;  // reconfiguration time
  std::vector<BitstreamKernel> kernels;
  const BitstreamKernel* find(kernels::OpKind op) const;
};

// Load and validate; errors are InputError("<file>: <key path>", problem).
DeviceProfile load_device_profile(const std::string& path);
Bitstream load_bitstream(const std::string& path);

// The profile as a configs/devices/*.yaml file that load_device_profile reads back (dype-calibrate
// writes a detected GPU's, with its measured link and power).
std::string device_profile_yaml(const DeviceProfile& profile);

}  // namespace dype::hw
