#pragma once
// Device profiles for detected accelerators, derived from what the device reports, so a real GPU
// is planned with no file written by the user. The numbers come from the device's attributes
// (multiprocessor count, clocks, memory bus, L2, copy engines; PCIe link and power limit from
// NVML / ROCm SMI); a small table of known products adds what attributes cannot give (peak FP32
// where the lanes per multiprocessor are not derivable, idle and busy power). An unknown product
// still gets a profile from its attributes, and says which of its numbers are estimates.
//
//   hw::AcceleratorAttributes a = ...;  // cudaDeviceGetAttribute, NVML
//   hw::DeviceProfile p = hw::derive_device_profile(a);
//   // p.id == "nvidia-h200", p.source == hw::ProfileSource::known_product
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "hw/device_profile.h"

namespace dype::hw {

// What a GPU runtime and its management library report about one device. 0 or "" = not reported.
struct AcceleratorAttributes {
  std::string vendor;            // "nvidia", "amd"
  std::string product;           // marketing name: "NVIDIA H200", "AMD Instinct MI210"
  std::string arch;              // "sm_90", "gfx90a"
  int compute_major = 0;         // CUDA compute capability (NVIDIA)
  int compute_minor = 0;
  int multiprocessors = 0;       // SMs / CUs
  double clock_khz = 0;          // peak core clock
  double memory_clock_khz = 0;   // peak memory clock as the runtime reports it (DDR: x2 per bit)
  int memory_bus_bits = 0;
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
  int max_threads_per_multiprocessor = 0;
  int copy_engines = 0;          // async engines that copy beside kernels
  int pcie_generation = 0;       // negotiated link (NVML / SMI)
  int pcie_lanes = 0;
  double power_limit_w = 0;      // board power limit (NVML / SMI)
};

// The profile id of a product name: lower case, runs of anything but letters and digits become
// one '-': "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3". Known products may map to a shorter
// id ("AMD Instinct MI210" -> "amd-mi210", the id of configs/devices/amd-mi210.yaml).
std::string product_profile_id(std::string_view product);

// A product the table knows: what attributes cannot say.
struct KnownProduct {
  std::string_view name;        // as the runtime reports it (matched case-insensitively)
  std::string_view id;          // profile id
  std::string_view memory_type;
  double peak_fp32_tflops;      // vendor figure, non-tensor FP32
  double idle_w;                // static power at complete idle
  double execute_w;             // board power while kernels run (the vendor's board power)
};
const KnownProduct* find_known_product(std::string_view product);

// The profile of a detected device. Its source is known_product when the table has it, else
// detected; `estimated` then lists the numbers that are assumptions. Throws InputError naming the
// attribute when one the derivation needs is missing (multiprocessors, clocks, memory bus).
DeviceProfile derive_device_profile(const AcceleratorAttributes& attributes);

// Parses `key value` lines as dumped from cudaDeviceGetAttribute / torch.cuda.get_device_properties
// (device_attributes.txt of a measurement folder; `cudaDeviceProp <field> <value>` lines too).
// Unknown keys are ignored; InputError names the line of a malformed known one.
AcceleratorAttributes parse_attribute_dump(std::string_view text, const std::string& where);

}  // namespace dype::hw
