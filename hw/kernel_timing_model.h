#pragma once
// Kernel timing models: modelled kernel durations, pure functions of a device model (or a bitstream
// kernel) and an OpShape. The emu backend runs its virtual clock on them; the planner, device
// profiles and the performance-model code use them as ground truth for synthetic profiles. All results in seconds,
// all of them *modelled*.
//
// FPGA (from the loaded bitstream's kernel parameters):
//   sextans SpMM  (DyPe eq. for [30]):  t = C (nnz + 13 M) N / (F N_M 1e3).
//       (nnz + 13 M) N / N_M is a cycle count (N_M MAC units, one MAC each per cycle; 13 M is the
//       per-row pipeline overhead). With F in MHz, F * 1e3 is cycles per millisecond, so the paper's
//       expression is in MILLISECONDS; we return t_s = C (nnz + 13 M) N / (F_MHz 1e6 N_M).
//       Example: nnz = 1e6, M = 1e4, N = 64, C = 1 -> 1.13e6 * 64 / 640 = 113,000 cycles
//       = 0.5256 ms at 215 MHz.
//   swat window attention (DyPe eq. 9, [6]):  t = C (seq_len t_pipeline + t_init)(w / 1024) / F.
//       t_pipeline and t_init are cycles, so with F in Hz the result is in seconds (F in MHz would
//       give microseconds): t_s = C (seq_len 201 + 904)(w / 1024) / (421e6). One attention layer
//       (all heads) per call, as in the paper; heads and head_dim do not enter.
//       Example: seq_len = 4096, w = 1024 -> 824,200 cycles = 1.9577 ms.
//   systolic_gemm (FPGA GEMM after [31], de Fine Licht et al., FPGA'20):
//       t = launch + 2 M K N / (peak_flops * efficiency) — a compute-bound systolic array whose
//       peak is set in the manifest.
// GPU (roofline, from the device model; eff_c / eff_m = compute / memory efficiency of the op):
//   gemm:   t = launch + max(2MKN / (peak * eff_c * occ), 4(MK + KN + MN) / (bw * eff_m)),
//           occ = min(1, MN / saturation_outputs) (small outputs cannot fill all compute units).
//   spmm:   rocSPARSE-style CSR kernel, one wavefront of W lanes per row looping over the output
//           columns: P = ceil(N / W) passes per row. Bytes = 8 nnz (value + index) + 4 (M + 1)
//           + 4 M N (write Y) + G nnz (1 - h) + 4 K N h, where G is a dense row's 4 N bytes rounded
//           up to whole gather transactions and h = min(1, cache / (4 K N)) is the fraction of the
//           dense operand's rows that stay in cache (sparser, larger graphs reuse less). Bandwidth
//           bw * eff_m / (1 + skew_penalty log2(max(1, degree_skew))) (load imbalance of
//           power-law rows). Row passes cost a dependent-load latency each, overlapped only with
//           other rows in flight: t = launch + max(bytes / that, 2 nnz P W / (peak eff_c))
//           + M P row_latency / concurrent_rows. Without wavefront / row_latency / gather_bytes
//           (0) this is the plain bandwidth roofline.
//   window attention: modelled as dense attention, as in the paper (GPU libraries only save
//           memory, not time): per head QK^T and SV are 2 S^2 D flops each and the S x S scores
//           are written, read by softmax, written, read: 16 S^2 bytes per head; plus Q, K, V, out.
//           t = 3 launches + max(flops / (peak eff_c), bytes / (bw eff_m)).
//   softmax / layer_norm: memory bound, t = launch + 8 M N / (bw eff_m) (+ 3 passes' flops).
// CPU-kind models use the same roofline formulas.
#include "hw/device_profile.h"
#include "common/op.h"

namespace dype::hw::timing {

double sextans_spmm_s(const BitstreamKernel& k, std::int64_t m, std::int64_t nnz, std::int64_t n);
double swat_window_attention_s(const BitstreamKernel& k, std::int64_t seq_len, std::int64_t window);
double systolic_gemm_s(const BitstreamKernel& k, std::int64_t m, std::int64_t kk, std::int64_t n);

double roofline_gemm_s(const DeviceProfile& d, const OpModelParams& p, std::int64_t m,
                       std::int64_t k, std::int64_t n);
double roofline_spmm_s(const DeviceProfile& d, const OpModelParams& p, const kernels::OpShape& s);
double roofline_dense_attention_s(const DeviceProfile& d, const OpModelParams& p,
                                  const kernels::OpShape& s);
double roofline_rowwise_s(const DeviceProfile& d, const OpModelParams& p, const kernels::OpShape& s);

// The duration of `shape` on a device of this model with this bitstream (FPGA; may be null).
// Throws DeviceError(device_name, ...) when the op is not supported.
double modelled_time_s(const DeviceProfile& model, const Bitstream* bitstream,
                       const kernels::OpShape& shape, const std::string& device_name);
// Whether modelled_time_s would succeed.
bool model_supports(const DeviceProfile& model, const Bitstream* bitstream, kernels::OpKind op);

}  // namespace dype::hw::timing

namespace dype::hw {

// The time `profile` models for `shape` on a device without an FPGA image (the roofline formulas
// above, which the emulator's clock uses too): how the planner times a device that has a profile
// in its config but no modelled time of its own, such as the detected CPU. DeviceError naming
// `device` when the profile cannot run the op.
double profile_kernel_time_s(const DeviceProfile& profile, const kernels::OpShape& shape,
                             const std::string& device);

}  // namespace dype::hw
