// The xrt backend. Without an FPGA, XRT's noop shim (XCL_EMULATION_MODE=noop, libxrt_noop.so from
// libxrt-dev) opens a device that accepts buffer allocation, write/sync/read and the electrical
// query, but has no xclbin to load and no compute units: these tests exercise exactly that host
// path, manifest parsing, power parsing, and the swap's failure/rollback path. Kernel launches on
// a programmed board need hardware and are not run here.
#include <gtest/gtest.h>

#include "../test_temp_dir.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hw/registry.h"
#include "common/error.h"

#if DYPE_HAVE_XRT
#include "hw/xrt/xrt_backend.h"
#include "hw/xrt/xrt_device.h"
#include "hw/xrt/xrt_manifest.h"
#endif

namespace hw = dype::hw;
namespace fs = std::filesystem;

#if !DYPE_HAVE_XRT
TEST(XrtDevice, NotBuilt) { GTEST_SKIP() << "built without XRT (DYPE_WITH_XRT=OFF or no headers)"; }
#else

namespace {

// XRT loads its shim from $XILINX_XRT/lib: point it at a folder whose lib/ is the system library
// folder holding libxrt_noop.so.2. Must run before the first XRT call in the process.
std::string setup_noop_shim() {
  if (std::getenv("XCL_EMULATION_MODE")) return "";  // the caller chose a mode: respect it
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/opt/xilinx/xrt/lib", "/usr/lib"}) {
    if (!fs::exists(fs::path(dir) / "libxrt_noop.so.2")) continue;
    const fs::path root = fs::temp_directory_path() / "dype_xrt_noop";
    fs::create_directories(root);
    std::error_code ec;
    if (!fs::exists(root / "lib")) fs::create_directory_symlink(dir, root / "lib", ec);
    setenv("XILINX_XRT", root.c_str(), 1);
    setenv("XCL_EMULATION_MODE", "noop", 1);
    return "";
  }
  return "libxrt_noop.so.2 not found (libxrt-dev ships it)";
}

struct Noop {
  std::unique_ptr<hw::XrtDevice> dev;
  std::string why;
};
Noop& noop() {
  static Noop n = [] {
    Noop r;
    r.why = setup_noop_shim();
    if (!r.why.empty()) return r;
    try {
      hw::DeviceInfo info;
      info.name = "fpga0";
      r.dev = std::make_unique<hw::XrtDevice>(info, 0);
    } catch (const std::exception& e) {
      r.why = e.what();
    }
    return r;
  }();
  return n;
}
#define NEED_NOOP()                                                                  \
  do {                                                                               \
    if (!noop().dev) {                                                               \
      GTEST_SKIP() << "no XRT device, not even the noop shim: " << noop().why;       \
    }                                                                                \
  } while (0)

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = dype::test::process_temp_dir("dype_xrt_files") / name;
  std::ofstream(p) << text;
  return p;
}

const char* kManifest = R"(name: test-image
device_model: xilinx-u280
load_time_ms: 1500
xclbin: missing-image.xclbin
kernels:
  - op: spmm
    design: sextans
    frequency_mhz: 215
    mac_units: 640
    xrt:
      kernel: sextans
      args:
        - {name: C, source: y}
        - {name: A_ptr, source: indptr}
        - {name: A_idx, source: indices}
        - {name: A_val, source: values}
        - {name: B, source: x}
        - {name: M, source: m, type: u32}
        - {name: N, source: n}
        - {name: alpha, source: const, type: f32, value: 2.0}
)";

}  // namespace

TEST(XrtManifest, ParsesArgumentLayoutAndResolvesXclbin) {
  const auto p = write_file("dype_xrt_manifest.yaml", kManifest);
  const auto m = hw::load_xrt_manifest(p.string());
  EXPECT_EQ(m.xclbin, (p.parent_path() / "missing-image.xclbin").string());
  ASSERT_EQ(m.kernels.count(dype::kernels::OpKind::spmm), 1u);
  const auto& sig = m.kernels.at(dype::kernels::OpKind::spmm);
  EXPECT_EQ(sig.kernel, "sextans");
  ASSERT_EQ(sig.args.size(), 8u);
  EXPECT_EQ(sig.args[0].source, dype::kernels::xrt::Source::y);
  EXPECT_EQ(sig.args[7].value, 2.0);
  // The shared bitstream loader accepts the xrt keys too.
  EXPECT_NO_THROW(hw::load_bitstream(p.string()));
}

TEST(XrtManifest, ShippedManifestsDeclareTheirLayouts) {
  const auto m = hw::load_xrt_manifest(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-swat.yaml");
  EXPECT_EQ(m.kernels.count(dype::kernels::OpKind::spmm), 1u);
  EXPECT_EQ(m.kernels.count(dype::kernels::OpKind::window_attention), 1u);
}

TEST(XrtManifest, BadLayoutNamesTheKey) {
  std::string bad = kManifest;
  bad.replace(bad.find("source: x}"), 10, "source: q}");
  const auto p = write_file("dype_xrt_bad.yaml", bad);
  try {
    hw::load_xrt_manifest(p.string());
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kernels[0].xrt"), std::string::npos) << e.what();
  }
}

TEST(XrtPower, ParsesElectricalJson) {
  EXPECT_EQ(hw::parse_board_power_w(R"({"power_consumption_watts": "23.5"})"), 23.5);
  EXPECT_FALSE(hw::parse_board_power_w(R"({"power_consumption_watts": "N\/A"})"));
  EXPECT_FALSE(hw::parse_board_power_w("not json"));
  EXPECT_FALSE(hw::parse_board_power_w("{}"));
}

TEST(XrtDevice, DetectionReportsWhy) {
  setup_noop_shim();
  std::string why;
  const auto devs = hw::detect_xrt_devices(&why);
  if (devs.empty()) {
    EXPECT_FALSE(why.empty());
  }
  std::printf("xrt detection: %zu device(s) %s\n", devs.size(), why.c_str());
  EXPECT_NE(hw::find_backend("xrt"), nullptr);
}

TEST(XrtDevice, NoopShimBufferRoundTrip) {
  NEED_NOOP();
  auto& d = *noop().dev;
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i);
  auto b = d.allocate(v.size() * 4);
  d.copy_from_host(*b, std::as_bytes(std::span<const float>(v)));
  std::vector<float> back(v.size());
  d.copy_to_host(*b, std::as_writable_bytes(std::span<float>(back)));
  EXPECT_EQ(back, v);
  EXPECT_EQ(d.memory_used_bytes(), v.size() * 4);
  EXPECT_THROW(d.copy_from_host(*b, std::as_bytes(std::span<const float>(v)), 8), dype::InputError);
  // The noop shim answers the electrical query with N/A: no power, no energy.
  EXPECT_FALSE(d.board_power_w());
  EXPECT_FALSE(d.energy());
}

TEST(XrtDevice, NoBitstreamMeansNoKernels) {
  NEED_NOOP();
  auto& d = *noop().dev;
  EXPECT_FALSE(d.supports(dype::kernels::OpKind::spmm));
  auto a = d.allocate(64), x = d.allocate(64), y = d.allocate(64);
  EXPECT_THROW(d.launch(hw::KernelLaunch::spmm(*a, *a, *a, *x, *y, 1, 1, 1, 1)), hw::DeviceError);
}

TEST(XrtDevice, FailedSwapRollsBackAndKeepsBufferContents) {
  NEED_NOOP();
  auto& d = *noop().dev;
  std::vector<std::int32_t> v{1, 2, 3, 4, 5};
  auto b = d.allocate(v.size() * 4);
  d.copy_from_host(*b, std::as_bytes(std::span<const std::int32_t>(v)));
  const auto p = write_file("dype_xrt_swap.yaml", kManifest);  // names an xclbin that is absent
  try {
    d.load_bitstream(p.string());
    FAIL() << "expected DeviceError";
  } catch (const hw::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("previous image restored"), std::string::npos) << e.what();
  }
  // The buffer was parked, its bo dropped and recreated: contents survive.
  std::vector<std::int32_t> back(v.size());
  d.copy_to_host(*b, std::as_writable_bytes(std::span<std::int32_t>(back)));
  EXPECT_EQ(back, v);
  EXPECT_FALSE(d.supports(dype::kernels::OpKind::spmm));
}

#endif
