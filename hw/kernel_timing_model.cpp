#include "hw/kernel_timing_model.h"

#include <algorithm>
#include <cmath>

#include "hw/device.h"

namespace dype::hw::timing {

using kernels::OpKind;

double sextans_spmm_s(const BitstreamKernel& k, std::int64_t m, std::int64_t nnz, std::int64_t n) {
  const double cycles = (static_cast<double>(nnz) + 13.0 * static_cast<double>(m)) *
                        static_cast<double>(n) / static_cast<double>(k.mac_units);
  return k.launch_overhead_s + k.scale_c * cycles / (k.frequency_mhz * 1e6);
}

double swat_window_attention_s(const BitstreamKernel& k, std::int64_t seq_len,
                               std::int64_t window) {
  const double cycles = (static_cast<double>(seq_len) * k.pipeline_cycles + k.init_cycles) *
                        (static_cast<double>(window) / 1024.0);
  return k.launch_overhead_s + k.scale_c * cycles / (k.frequency_mhz * 1e6);
}

double systolic_gemm_s(const BitstreamKernel& k, std::int64_t m, std::int64_t kk, std::int64_t n) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(kk) * static_cast<double>(n);
  return k.launch_overhead_s + k.scale_c * flops / (k.peak_flops * k.efficiency);
}

double roofline_gemm_s(const DeviceProfile& d, const OpModelParams& p, std::int64_t m,
                       std::int64_t k, std::int64_t n) {
  const double M = static_cast<double>(m), K = static_cast<double>(k), N = static_cast<double>(n);
  const double occ = d.saturation_outputs > 0 ? std::min(1.0, M * N / d.saturation_outputs) : 1.0;
  const double t_compute = 2.0 * M * K * N / (d.peak_fp32_flops * p.compute_efficiency * std::max(occ, 1e-3));
  const double t_memory = 4.0 * (M * K + K * N + M * N) / (d.memory_bandwidth_bytes_per_s * p.memory_efficiency);
  return p.launch_overhead_s + std::max(t_compute, t_memory);
}

double roofline_spmm_s(const DeviceProfile& d, const OpModelParams& p, const kernels::OpShape& s) {
  const double M = static_cast<double>(s.m), K = static_cast<double>(s.k), N = static_cast<double>(s.n);
  const double nnz = static_cast<double>(s.nnz);
  // A wavefront works on one row, its lanes over the output columns: ceil(N / W) passes per row,
  // and the FMAs of a pass occupy all W lanes even when fewer columns are left.
  const double passes = p.wavefront > 0 ? std::max(1.0, std::ceil(N / p.wavefront)) : 1.0;
  const double lanes = p.wavefront > 0 ? passes * p.wavefront : N;
  // A gathered dense row moves whole memory transactions.
  const double row_bytes = p.gather_bytes > 0 ? std::ceil(4.0 * N / p.gather_bytes) * p.gather_bytes : 4.0 * N;
  const double dense_bytes = 4.0 * K * N;
  const double hit = dense_bytes > 0 ? std::min(1.0, d.cache_bytes / dense_bytes) : 1.0;
  const double bytes = 8.0 * nnz + 4.0 * (M + 1) + 4.0 * M * N + row_bytes * nnz * (1.0 - hit) +
                       4.0 * K * N * hit;
  const double skew = std::max(1.0, s.degree_skew);
  const double bw = d.memory_bandwidth_bytes_per_s * p.memory_efficiency /
                    (1.0 + p.skew_penalty * std::log2(skew));
  const double t_compute = 2.0 * nnz * lanes / (d.peak_fp32_flops * p.compute_efficiency);
  // Each row pass is a chain of dependent loads (row pointers, then indices and values, then the
  // gathers, then the store) that only other rows in flight hide: Little's law gives
  // concurrent_rows / row_latency row passes per second. Short rows cannot amortise it.
  const double t_rows = p.concurrent_rows > 0 ? M * passes * p.row_latency_s / p.concurrent_rows : 0.0;
  return p.launch_overhead_s + std::max(bytes / bw, t_compute) + t_rows;
}

double roofline_dense_attention_s(const DeviceProfile& d, const OpModelParams& p,
                                  const kernels::OpShape& s) {
  const double S = static_cast<double>(s.seq_len), H = static_cast<double>(s.heads),
               D = static_cast<double>(s.head_dim);
  const double flops = H * (4.0 * S * S * D + 5.0 * S * S);  // QK^T, SV, softmax
  const double bytes = H * 16.0 * S * S + 16.0 * S * H * D;
  const double t_compute = flops / (d.peak_fp32_flops * p.compute_efficiency);
  const double t_memory = bytes / (d.memory_bandwidth_bytes_per_s * p.memory_efficiency);
  return 3.0 * p.launch_overhead_s + std::max(t_compute, t_memory);
}

double roofline_rowwise_s(const DeviceProfile& d, const OpModelParams& p, const kernels::OpShape& s) {
  const double elems = static_cast<double>(s.m) * static_cast<double>(s.n);
  const double t_memory = 8.0 * elems / (d.memory_bandwidth_bytes_per_s * p.memory_efficiency);
  const double t_compute = 5.0 * elems / (d.peak_fp32_flops * p.compute_efficiency);
  return p.launch_overhead_s + std::max(t_memory, t_compute);
}

bool model_supports(const DeviceProfile& model, const Bitstream* bitstream, OpKind op) {
  if (model.kind == DeviceKind::fpga) return bitstream && bitstream->find(op);
  return model.ops.count(op) > 0;
}

double modelled_time_s(const DeviceProfile& model, const Bitstream* bitstream,
                       const kernels::OpShape& s, const std::string& device_name) {
  if (model.kind == DeviceKind::fpga) {
    const BitstreamKernel* k = bitstream ? bitstream->find(s.kind) : nullptr;
    if (!k) {
      throw DeviceError(device_name, std::string(to_string(s.kind)) + " not supported: " +
                                         (bitstream ? "bitstream '" + bitstream->name +
                                                          "' has no such kernel"
                                                    : std::string("no bitstream loaded")));
    }
    if (k->design == "sextans") return sextans_spmm_s(*k, s.m, s.nnz, s.n);
    if (k->design == "swat") return swat_window_attention_s(*k, s.seq_len, s.window);
    return systolic_gemm_s(*k, s.m, s.k, s.n);
  }
  auto it = model.ops.find(s.kind);
  if (it == model.ops.end()) {
    throw DeviceError(device_name, std::string(to_string(s.kind)) + " not supported by model " +
                                       model.id);
  }
  switch (s.kind) {
    case OpKind::spmm: return roofline_spmm_s(model, it->second, s);
    case OpKind::gemm: return roofline_gemm_s(model, it->second, s.m, s.k, s.n);
    case OpKind::window_attention: return roofline_dense_attention_s(model, it->second, s);
    case OpKind::softmax:
    case OpKind::layer_norm: return roofline_rowwise_s(model, it->second, s);
  }
  return 0.0;
}

}  // namespace dype::hw::timing

namespace dype::hw {

double profile_kernel_time_s(const DeviceProfile& profile, const kernels::OpShape& shape,
                             const std::string& device) {
  return timing::modelled_time_s(profile, nullptr, shape, device);
}

}  // namespace dype::hw
