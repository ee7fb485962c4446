#include "hw/detected_profile.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

#include "common/error.h"

namespace dype::hw {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Vendor figures: peak FP32 (non-tensor, boost clock) and board power. Idle power is what an idle
// board of that kind typically reads (nvidia-smi / rocm-smi), an approximation the energy
// objective uses; every energy figure is modelled anyway.
constexpr std::array kKnown = {
    KnownProduct{"NVIDIA H200", "nvidia-h200", "HBM3e", 67.0, 75, 700},
    KnownProduct{"NVIDIA H200 NVL", "nvidia-h200-nvl", "HBM3e", 60.0, 60, 600},
    KnownProduct{"NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3", "HBM3", 67.0, 70, 700},
    KnownProduct{"NVIDIA H100 PCIe", "nvidia-h100-pcie", "HBM2e", 51.0, 50, 350},
    KnownProduct{"NVIDIA H100 NVL", "nvidia-h100-nvl", "HBM3", 60.0, 60, 400},
    KnownProduct{"NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb", "HBM2e", 19.5, 50, 400},
    KnownProduct{"NVIDIA A100-SXM4-40GB", "nvidia-a100-sxm4-40gb", "HBM2", 19.5, 50, 400},
    KnownProduct{"NVIDIA A100 80GB PCIe", "nvidia-a100-80gb-pcie", "HBM2e", 19.5, 40, 300},
    KnownProduct{"NVIDIA L40S", "nvidia-l40s", "GDDR6", 91.6, 35, 350},
    KnownProduct{"NVIDIA L4", "nvidia-l4", "GDDR6", 30.3, 16, 72},
    // The DyPe paper's Table II: 45 W static, 300 W dynamic (configs/devices/amd-mi210.yaml).
    KnownProduct{"AMD Instinct MI210", "amd-mi210", "HBM2e", 22.6, 45, 345},
    KnownProduct{"AMD Instinct MI300X", "amd-mi300x", "HBM3", 163.4, 140, 750},
};

// FP32 lanes per multiprocessor: what turns SMs x clock into peak FLOP/s for a product the table
// lacks. NVIDIA by compute capability (Volta, A100: 64; Ampere/Ada consumer, Hopper and later:
// 128); AMD CDNA by architecture (MI100/MI200: 64 lanes a CU; MI300 issues packed FP32: 128).
std::optional<int> fp32_lanes(const AcceleratorAttributes& a) {
  if (a.vendor == "nvidia") {
    if (a.compute_major == 7 || (a.compute_major == 8 && a.compute_minor == 0)) return 64;
    if (a.compute_major == 6) return a.compute_minor == 0 ? 64 : 128;
    if (a.compute_major >= 8) return 128;
    return std::nullopt;
  }
  if (a.vendor == "amd") {
    if (a.arch.rfind("gfx94", 0) == 0 || a.arch.rfind("gfx95", 0) == 0) return 128;
    if (a.arch.rfind("gfx90", 0) == 0 || a.arch.rfind("gfx908", 0) == 0) return 64;
    return std::nullopt;
  }
  return std::nullopt;
}

void add_estimate(std::string& list, const std::string& what) {
  list += (list.empty() ? "" : "; ") + what;
}

}  // namespace

std::string product_profile_id(std::string_view product) {
  if (const KnownProduct* k = find_known_product(product)) return std::string(k->id);
  std::string id;
  for (char c : product) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      id += static_cast<char>(std::tolower(u));
    } else if (!id.empty() && id.back() != '-') {
      id += '-';
    }
  }
  while (!id.empty() && id.back() == '-') id.pop_back();
  return id.empty() ? "unnamed-device" : id;
}

const KnownProduct* find_known_product(std::string_view product) {
  const std::string p = lower(product);
  for (const KnownProduct& k : kKnown)
    if (lower(k.name) == p) return &k;
  return nullptr;
}

DeviceProfile derive_device_profile(const AcceleratorAttributes& a) {
  const std::string where = "device attributes of '" + a.product + "'";
  if (a.multiprocessors <= 0) throw InputError(where, "multiprocessor count not reported");
  if (a.clock_khz <= 0) throw InputError(where, "core clock not reported");
  if (a.memory_clock_khz <= 0 || a.memory_bus_bits <= 0)
    throw InputError(where, "memory clock or bus width not reported (memory bandwidth unknown)");
  if (a.memory_bytes == 0) throw InputError(where, "memory size not reported");

  const KnownProduct* known = find_known_product(a.product);
  DeviceProfile d;
  d.source = known ? ProfileSource::known_product : ProfileSource::detected;
  d.id = product_profile_id(a.product);
  d.product = a.product;
  d.kind = DeviceKind::gpu;
  d.memory_bytes = a.memory_bytes;
  d.memory_type = known ? std::string(known->memory_type) : "";
  // Double data rate: two transfers per memory clock on each bit of the bus (H200: 3.2 GHz x
  // 6016 bits x 2 / 8 = 4.8 TB/s, the vendor figure).
  d.memory_bandwidth_bytes_per_s = a.memory_clock_khz * 1e3 * 2.0 * a.memory_bus_bits / 8.0;
  d.cache_bytes = static_cast<double>(a.l2_bytes);
  const int threads = a.max_threads_per_multiprocessor > 0 ? a.max_threads_per_multiprocessor : 2048;
  // GEMM outputs that keep every multiprocessor busy: a few outputs per resident thread.
  d.saturation_outputs = 4.0 * a.multiprocessors * threads;

  std::string est;
  if (known) {
    d.peak_fp32_flops = known->peak_fp32_tflops * 1e12;
    d.power.idle_w = known->idle_w;
    d.power.execute_w = known->execute_w;
  } else {
    const auto lanes = fp32_lanes(a);
    d.peak_fp32_flops = a.multiprocessors * static_cast<double>(lanes.value_or(64)) * 2.0 * a.clock_khz * 1e3;
    if (!lanes) add_estimate(est, "peak FP32 assumes 64 FP32 lanes per multiprocessor (architecture not in the table)");
    if (a.power_limit_w > 0) {
      d.power.execute_w = a.power_limit_w;
    } else {
      d.power.execute_w = 300;
      add_estimate(est, "busy power 300 W assumed (no power limit reported)");
    }
    d.power.idle_w = 0.12 * d.power.execute_w;
    add_estimate(est, "idle power assumed 12% of busy power (product not in the table)");
  }
  // As configs/devices/amd-mi210.yaml: only the DMA engines run during a copy.
  d.power.transfer_w = d.power.idle_w + 0.1 * (d.power.execute_w - d.power.idle_w);

  d.link.type = LinkType::pcie;
  if (a.pcie_generation >= 1 && a.pcie_generation <= 6 &&
      (a.pcie_lanes == 1 || a.pcie_lanes == 2 || a.pcie_lanes == 4 || a.pcie_lanes == 8 || a.pcie_lanes == 16)) {
    d.link.generation = a.pcie_generation;
    d.link.lanes = a.pcie_lanes;
  } else {
    d.link.generation = 4;
    d.link.lanes = 16;
    add_estimate(est, "host link assumed PCIe 4.0 x16 (link not reported)");
  }
  d.link.latency_s = 5e-6;

  // Library kernels (cuBLAS/cuSPARSE, rocSPARSE/own GEMM): roofline efficiencies of a large,
  // regular shape. The SpMM row-pass terms follow hw/kernel_timing_model.h: a warp (wavefront) per row
  // over the output columns, gathers rounded up to the memory transaction (a 32 B sector on
  // NVIDIA, a 128 B line on AMD), half the resident warps in flight. They are estimates until a
  // fitted store (dype-profile, or the daemon's start-up measurement) replaces them.
  const bool amd = a.vendor == "amd";
  const double wavefront = amd ? 64 : 32;
  OpModelParams spmm{.compute_efficiency = 0.5, .memory_efficiency = 0.6, .launch_overhead_s = 8e-6,
                     .skew_penalty = 0.08, .wavefront = wavefront, .row_latency_s = 3e-6,
                     .concurrent_rows = 0.5 * a.multiprocessors * threads / wavefront,
                     .gather_bytes = amd ? 128.0 : 32.0};
  d.ops[kernels::OpKind::gemm] = {.compute_efficiency = 0.7, .memory_efficiency = 0.8, .launch_overhead_s = 6e-6};
  d.ops[kernels::OpKind::spmm] = spmm;
  d.ops[kernels::OpKind::window_attention] = {.compute_efficiency = 0.55, .memory_efficiency = 0.75,
                                              .launch_overhead_s = 6e-6};
  d.ops[kernels::OpKind::softmax] = {.compute_efficiency = 0.3, .memory_efficiency = 0.8, .launch_overhead_s = 4e-6};
  d.ops[kernels::OpKind::layer_norm] = {.compute_efficiency = 0.3, .memory_efficiency = 0.75,
                                        .launch_overhead_s = 4e-6};
  d.estimated = est;
  return d;
}

AcceleratorAttributes parse_attribute_dump(std::string_view text, const std::string& where) {
  AcceleratorAttributes a;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    if (key == "cudaDeviceProp" && !(ls >> key)) continue;
    std::string value;
    std::getline(ls >> std::ws, value);
    const auto number = [&]() -> double {
      double v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end == value.data() || v < 0)
        throw InputError(where + ":" + std::to_string(line_no) + ": " + key,
                         "expected a non-negative number, got '" + value + "'");
      return v;
    };
    if (key == "name") {
      a.product = value;
      if (a.vendor.empty()) a.vendor = lower(value).rfind("nvidia", 0) == 0 ? "nvidia" : lower(value).rfind("amd", 0) == 0 ? "amd" : "";
    } else if (key == "gcnArchName") {
      if (value.rfind("gfx", 0) == 0) a.arch = value, a.vendor = "amd";
    } else if (key == "major") {
      a.compute_major = static_cast<int>(number());
    } else if (key == "minor") {
      a.compute_minor = static_cast<int>(number());
    } else if (key == "multi_processor_count" || key == "multiProcessorCount") {
      a.multiprocessors = static_cast<int>(number());
    } else if (key == "clock_rate" || key == "clockRate") {
      a.clock_khz = number();
    } else if (key == "memory_clock_rate" || key == "memoryClockRate") {
      a.memory_clock_khz = number();
    } else if (key == "memory_bus_width" || key == "memoryBusWidth") {
      a.memory_bus_bits = static_cast<int>(number());
    } else if (key == "total_memory" || key == "totalGlobalMem") {
      a.memory_bytes = static_cast<std::size_t>(number());
    } else if (key == "L2_cache_size" || key == "l2CacheSize") {
      a.l2_bytes = static_cast<std::size_t>(number());
    } else if (key == "max_threads_per_multi_processor" || key == "maxThreadsPerMultiProcessor") {
      a.max_threads_per_multiprocessor = static_cast<int>(number());
    } else if (key == "asyncEngineCount") {
      a.copy_engines = static_cast<int>(number());
    }
  }
  if (a.vendor == "nvidia" && a.compute_major > 0)
    a.arch = "sm_" + std::to_string(a.compute_major) + std::to_string(a.compute_minor);
  return a;
}

}  // namespace dype::hw
