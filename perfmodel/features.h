#pragma once
// Regression features per (kernel, device class), after the DyPe paper (Section V, Eqs. 7-9) plus
// CPU feature sets chosen by measurement. A feature set is a fixed, named list of functions of an
// OpShape; a model is t = sum_i c_i * f_i(shape). Feature values are plain doubles computed with a
// handful of multiplies, so prediction stays in the tens of nanoseconds.
//
//   const auto& fs = dype::perf::feature_set(OpKind::spmm, DeviceClass::gpu);
//   std::array<double, dype::perf::kMaxFeatures> f{};
//   fs.compute(shape, dype::perf::FeatureParams{}, f.data());   // f[0..fs.size())
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/op.h"

namespace dype::perf {

using kernels::OpKind;
using kernels::OpShape;

// Which family of feature formulas applies. Emulated devices use the class they emulate.
enum class DeviceClass : std::uint8_t { cpu, gpu, fpga };

std::string_view to_string(DeviceClass cls);
std::optional<DeviceClass> device_class_from_string(std::string_view name);

inline constexpr int kMaxFeatures = 16;

// Machine/design constants some feature formulas need. Stored with each model so a prediction
// reproduces the profiled formula exactly, whatever machine loads the model.
struct FeatureParams {
  // CPU: last-level and per-core L2 cache sizes and the SIMD width in floats.
  double llc_bytes = 32.0 * 1024 * 1024;
  double l1_bytes = 48.0 * 1024;
  double l2_bytes = 1024.0 * 1024;
  double simd_floats = 16;
  // CPU: worker threads of the profiled device (how the kernels split their work into tasks).
  double threads = 1;
  // FPGA SpMM, Sextans (paper Eq. under 7): F in MHz, N_M MAC units.
  double sextans_f_mhz = 215;
  double sextans_nm = 640;
  // FPGA window attention, SWAT (Eq. 9): cycles per token, init cycles, F in MHz.
  double swat_t_pipeline = 201;
  double swat_t_init = 904;
  double swat_f_mhz = 421;
};

struct FeatureSet {
  std::string_view id;                          // stable name stored in model files
  OpKind kind;
  DeviceClass device_class;
  std::span<const std::string_view> names;      // one per coefficient
  std::span<const bool> non_negative;           // sign constraint per coefficient
  // The single "size" feature online refinement scales with (index into names).
  int size_feature;
  void (*compute)(const OpShape& shape, const FeatureParams& params, double* out);

  int size() const { return static_cast<int>(names.size()); }
};

// The default feature set for a kernel on a device class, and on a device of that backend
// (hw::DeviceInfo::backend: "cuda", "hip", "emu", ...) where the library behind it has its own (SpMM
// on CUDA: spmm.gpu.v4). Throws dype::Error when none exists.
const FeatureSet& feature_set(OpKind kind, DeviceClass cls, std::string_view backend = {});
// Lookup by stored id; nullptr when unknown.
const FeatureSet* feature_set_by_id(std::string_view id);
std::span<const FeatureSet> all_feature_sets();

// Helpers shared with tests and generators.
// Number of (i, j) pairs with |i - j| <= window / 2 inside [0, seq_len): the attention band size.
double window_band_pairs(std::int64_t seq_len, std::int64_t window);
// Sextans estimate: (nnz + 13 M) N / N_M cycles at F MHz (the paper's (nnz+13M)N/(F N_M 1e3) is
// the same figure in ms), returned in seconds.
double sextans_estimate_s(const OpShape& shape, const FeatureParams& params);
// SWAT estimate: (seq_len t_pipeline + t_init) (w / 1024) cycles at F MHz, in seconds.
double swat_estimate_s(const OpShape& shape, const FeatureParams& params);

}  // namespace dype::perf
