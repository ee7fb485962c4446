// Device profiles derived from what a detected accelerator reports (hw/detected_profile.h), checked
// with the attribute values a real NVIDIA H200 reported (tests/data/devices/
// nvidia-h200-attributes.txt, copied from the measurement folder h200-2026-11-27) against the
// vendor's datasheet: 4.8 TB/s HBM3e, 141 GB, 67 TFLOP/s FP32, 50 MB L2 (60 MiB reported).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hw/detected_profile.h"
#include "hw/kernel_timing_model.h"
#include "hw/system.h"
#include "hw/system_config.h"
#include "common/error.h"

namespace {

namespace hw = dype::hw;

hw::AcceleratorAttributes h200() {
  const std::string path = std::string(DYPE_SOURCE_DIR) + "/tests/data/devices/nvidia-h200-attributes.txt";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return hw::parse_attribute_dump(text.str(), path);
}

TEST(DetectedProfile, H200FromItsRealAttributes) {
  const hw::AcceleratorAttributes a = h200();
  EXPECT_EQ(a.product, "NVIDIA H200");
  EXPECT_EQ(a.vendor, "nvidia");
  EXPECT_EQ(a.arch, "sm_90");
  EXPECT_EQ(a.multiprocessors, 132);
  EXPECT_EQ(a.copy_engines, 3);
  const hw::DeviceProfile p = hw::derive_device_profile(a);
  EXPECT_EQ(p.id, "nvidia-h200");
  EXPECT_EQ(p.source, hw::ProfileSource::known_product);
  // The dump has no NVML link; with the one NVML reports on that host nothing is an estimate.
  EXPECT_EQ(p.estimated, "host link assumed PCIe 4.0 x16 (link not reported)");
  hw::AcceleratorAttributes linked = a;
  linked.pcie_generation = 5;
  linked.pcie_lanes = 16;
  const hw::DeviceProfile with_link = hw::derive_device_profile(linked);
  EXPECT_TRUE(with_link.estimated.empty()) << with_link.estimated;
  EXPECT_EQ(with_link.link.generation, 5);
  EXPECT_EQ(p.kind, hw::DeviceKind::gpu);
  // 3.201 GHz x 6016 bits x 2 / 8: the datasheet's 4.8 TB/s.
  EXPECT_NEAR(p.memory_bandwidth_bytes_per_s / 1e12, 4.8, 0.02);
  EXPECT_NEAR(p.peak_fp32_flops / 1e12, 67.0, 0.1);
  EXPECT_EQ(p.cache_bytes, 62914560.0);
  EXPECT_EQ(p.memory_bytes, 150109880320u);
  EXPECT_EQ(p.memory_type, "HBM3e");
  EXPECT_GT(p.power.execute_w, p.power.idle_w);
  EXPECT_GE(p.power.transfer_w, p.power.idle_w);
  for (auto op : {dype::kernels::OpKind::spmm, dype::kernels::OpKind::gemm, dype::kernels::OpKind::window_attention,
                  dype::kernels::OpKind::softmax, dype::kernels::OpKind::layer_norm})
    EXPECT_TRUE(p.ops.count(op)) << dype::kernels::to_string(op);
  // The roofline it gives is an H200's, not a CPU's: a 100000 x 128 x 128 GEMM was measured at
  // 0.169 ms there (bench_gpu_kernels); the model must land within a factor of three of it.
  dype::kernels::OpShape gemm{};
  gemm.kind = dype::kernels::OpKind::gemm;
  gemm.m = 100000;
  gemm.k = 128;
  gemm.n = 128;
  const double t = hw::profile_kernel_time_s(p, gemm, "gpu0");
  EXPECT_GT(t, 0.169e-3 / 3);
  EXPECT_LT(t, 0.169e-3 * 3);
}

// dype-calibrate writes a detected profile as a device file; loading it back gives the same numbers.
TEST(DetectedProfile, WrittenAsAFileItLoadsBackTheSame) {
  hw::DeviceProfile p = hw::derive_device_profile(h200());
  p.link.measured_bytes_per_s = 7.0e9;  // what dype-calibrate measured on the H200 (pageable, 256 MiB)
  const auto path = std::filesystem::temp_directory_path() / ("dype-h200-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << hw::device_profile_yaml(p);
  const hw::DeviceProfile q = hw::load_device_profile(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(q.id, "nvidia-h200");
  EXPECT_EQ(q.source, hw::ProfileSource::file);
  EXPECT_EQ(q.product, p.product);
  EXPECT_EQ(q.memory_type, p.memory_type);
  EXPECT_NEAR(q.memory_bandwidth_bytes_per_s, p.memory_bandwidth_bytes_per_s, 1e3);
  EXPECT_NEAR(q.peak_fp32_flops, p.peak_fp32_flops, 1e3);
  EXPECT_NEAR(static_cast<double>(q.memory_bytes), static_cast<double>(p.memory_bytes), 1024);
  EXPECT_EQ(q.link.generation, p.link.generation);
  EXPECT_NEAR(q.link.bandwidth_bytes_per_s(), 7.0e9, 1.0);
  EXPECT_NEAR(q.power.idle_w, p.power.idle_w, 1e-9);
  ASSERT_EQ(q.ops.size(), p.ops.size());
  const auto& a = p.ops.at(dype::kernels::OpKind::spmm);
  const auto& b = q.ops.at(dype::kernels::OpKind::spmm);
  EXPECT_NEAR(a.concurrent_rows, b.concurrent_rows, 1e-6);
  EXPECT_NEAR(a.row_latency_s, b.row_latency_s, 1e-15);
  EXPECT_EQ(a.wavefront, b.wavefront);
}

TEST(DetectedProfile, UnknownProductFromAttributesAlone) {
  hw::AcceleratorAttributes a = h200();
  a.product = "NVIDIA Future GPU 2000";
  a.compute_major = 11;
  a.power_limit_w = 1000;
  const hw::DeviceProfile p = hw::derive_device_profile(a);
  EXPECT_EQ(p.id, "nvidia-future-gpu-2000");
  EXPECT_EQ(p.source, hw::ProfileSource::detected);
  // 132 SMs x 128 lanes x 2 x 1.98 GHz
  EXPECT_NEAR(p.peak_fp32_flops / 1e12, 132 * 128 * 2 * 1.98e9 / 1e12, 1e-6);
  EXPECT_EQ(p.power.execute_w, 1000);  // the reported power limit
  EXPECT_NE(p.estimated.find("idle power"), std::string::npos) << p.estimated;
  EXPECT_NE(p.estimated.find("PCIe"), std::string::npos) << p.estimated;  // no link in the dump

  a.vendor = "acme";
  a.power_limit_w = 0;
  const hw::DeviceProfile q = hw::derive_device_profile(a);
  EXPECT_NE(q.estimated.find("64 FP32 lanes"), std::string::npos) << q.estimated;
  EXPECT_NE(q.estimated.find("300 W"), std::string::npos) << q.estimated;
}

TEST(DetectedProfile, ProductIds) {
  EXPECT_EQ(hw::product_profile_id("NVIDIA H200"), "nvidia-h200");
  EXPECT_EQ(hw::product_profile_id("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
  EXPECT_EQ(hw::product_profile_id("AMD Instinct MI210"), "amd-mi210");  // configs/devices/amd-mi210.yaml's id
  EXPECT_EQ(hw::product_profile_id("  Odd//Name (rev 2) "), "odd-name-rev-2");
  EXPECT_EQ(hw::product_profile_id("???"), "unnamed-device");
}

TEST(DetectedProfile, MissingAttributesAreNamed) {
  hw::AcceleratorAttributes a = h200();
  a.memory_bus_bits = 0;
  try {
    hw::derive_device_profile(a);
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("memory clock or bus width"), std::string::npos) << e.what();
  }
  // A device left without a profile says why, and keeps the link it reported.
  hw::DeviceConfig d;
  d.name = "gpu0";
  d.kind = hw::DeviceKind::gpu;
  a.pcie_generation = 5;
  a.pcie_lanes = 16;
  hw::apply_detected_profile(d, a);
  EXPECT_FALSE(d.profile.has_value());
  EXPECT_NE(d.no_profile_why.find("bus width"), std::string::npos);
  EXPECT_EQ(d.link.generation, 5);
  EXPECT_EQ(d.copy_engines, 3);
}

TEST(DetectedProfile, MalformedDumpNamesTheLine) {
  try {
    hw::parse_attribute_dump("name NVIDIA H200\nmulti_processor_count many\n", "attrs.txt");
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("attrs.txt:2: multi_processor_count"), std::string::npos) << e.what();
  }
}

hw::DeviceConfig gpu(const std::string& name, const std::string& backend, int engines) {
  hw::DeviceConfig d;
  d.name = name;
  d.backend = backend;
  d.kind = hw::DeviceKind::gpu;
  d.copy_engines = engines;
  return d;
}

TEST(DetectedProfile, TransfersFollowCopyEngines) {
  hw::SystemConfig cfg;
  hw::DeviceConfig cpu;
  cpu.name = "cpu0";
  cpu.backend = "cpu";
  cfg.devices = {cpu};
  hw::settle_transfers(cfg);
  EXPECT_FALSE(cfg.overlap_transfers);
  EXPECT_NE(cfg.transfers_why.find("CPU alone"), std::string::npos);

  cfg.devices = {cpu, gpu("gpu0", "cuda", 3)};  // the H200: three copy engines
  hw::settle_transfers(cfg);
  EXPECT_TRUE(cfg.overlap_transfers) << cfg.transfers_why;
  EXPECT_NE(cfg.transfers_why.find("gpu0 reports 3 copy engines"), std::string::npos) << cfg.transfers_why;

  cfg.devices = {cpu, gpu("gpu0", "cuda", 3), gpu("gpu1", "cuda", 1)};
  hw::settle_transfers(cfg);
  EXPECT_FALSE(cfg.overlap_transfers);
  EXPECT_NE(cfg.transfers_why.find("gpu1 reports 1 copy engine"), std::string::npos) << cfg.transfers_why;

  cfg.devices = {cpu, gpu("gpu0", "emu", 0)};
  hw::settle_transfers(cfg);
  EXPECT_TRUE(cfg.overlap_transfers);
  EXPECT_NE(cfg.transfers_why.find("emulated"), std::string::npos);

  cfg.transfers_stated = true;  // a file's `transfers:` is never second-guessed
  cfg.overlap_transfers = false;
  hw::settle_transfers(cfg);
  EXPECT_FALSE(cfg.overlap_transfers);
}

TEST(DetectedProfile, SystemFileSaysWhyItsTransfersAreWhatTheyAre) {
  const auto cfg = hw::load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml");
  EXPECT_FALSE(cfg.transfers_why.empty());
}

}  // namespace
