// One conformance suite for every backend (ggml's test-backend-ops, ONNX Runtime's OpTester): the
// same cases run on each device this machine has — cpu, an emulated GPU, an emulated FPGA, and
// the first cuda / hip / xrt device when one is detected (otherwise the case skips and says why).
// Checked: host copies round-trip (at an offset), copy bounds and buffer ownership are refused
// with Device's one message, every op the device supports() matches the CPU kernels, and every op
// it does not support throws DeviceError. Vendor-specific behaviour (SpMM plan reuse, peer copies,
// mapped windows, bitstream swaps, virtual clock) stays in the per-backend test files.
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../test_device_data.h"

#include "hw/cpu/cpu_device.h"
#include "hw/device_profile.h"
#include "hw/registry.h"
#include "hw/system.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/spmm.h"
#include "kernels/cpu/window_attention.h"

namespace {

namespace hw = dype::hw;
namespace kc = dype::kernels::cpu;
using dype::kernels::OpKind;

// The paper testbed's emulated devices live as long as the test program.
hw::System& paper_system() {
  static hw::System sys = hw::System::from_config(
      hw::load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml"));
  return sys;
}

// A device under test, or the reason there is none here.
struct Target {
  hw::Device* device = nullptr;
  std::string why_not;
};

Target real_device(const std::string& backend) {
  static std::vector<hw::DevicePtr> kept;
  const hw::Backend* b = hw::find_backend(backend);
  if (!b) return {nullptr, "built without the " + backend + " backend"};
  const auto found = b->detect();
  if (found.empty()) return {nullptr, "no " + backend + " device detected on this machine"};
  hw::SystemConfig sys;
  kept.push_back(b->create(found.front(), sys));
  return {kept.back().get(), ""};
}

Target target(const std::string& which) {
  static hw::CpuDevice cpu(hw::detect_cpu_info("cpu0"));
  if (which == "cpu") return {&cpu, ""};
  if (which == "emu_gpu") return {&paper_system().device("gpu0"), ""};
  if (which == "emu_fpga") return {&paper_system().device("fpga0"), ""};
  return real_device(which);
}

using hw::testing::download;
using hw::testing::random_floats;
using hw::testing::upload;

// Absolute tolerances: GPU kernels sum in another order than the CPU's (emu runs the CPU kernels).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tolerance,
                  const std::string& op) {
  ASSERT_EQ(got.size(), want.size()) << op;
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance) << op << " at " << i;
}

class DeviceConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const Target t = target(GetParam());
    if (!t.device) GTEST_SKIP() << t.why_not;
    dev_ = t.device;
  }
  hw::Device& dev() { return *dev_; }

  // Runs `l` if the device supports its op and returns the output; otherwise checks the launch
  // throws DeviceError and returns nothing.
  // The Event is timed the way the device says (measured or modelled) and takes time.
  std::optional<std::vector<float>> run(const hw::KernelLaunch& l) {
    if (!dev().supports(l.shape.kind)) {
      EXPECT_THROW(dev().launch(l), hw::DeviceError) << to_string(l.shape.kind);
      return std::nullopt;
    }
    const hw::Event e = dev().launch(l);
    EXPECT_EQ(e.source, dev().info().time_source);
    EXPECT_GT(e.duration_s(), 0.0);
    return download(dev(), *l.output);
  }

 private:
  hw::Device* dev_ = nullptr;
};

TEST_P(DeviceConformance, CopiesRoundTripAtAnOffset) {
  const auto v = random_floats(300, 1);
  auto b = dev().allocate(400 * sizeof(float));
  dev().copy_from_host(*b, std::as_bytes(std::span<const float>(v)), 40 * sizeof(float));
  std::vector<float> back(300);
  dev().copy_to_host(*b, std::as_writable_bytes(std::span<float>(back)), 40 * sizeof(float));
  EXPECT_EQ(back, v);
  dev().copy_from_host(*b, {}, 400 * sizeof(float));  // an empty copy at the end is fine
}

TEST_P(DeviceConformance, CopyBoundsAndOwnershipAreRefusedOnce) {
  auto b = dev().allocate(64);
  std::vector<std::byte> host(16);
  try {
    dev().copy_from_host(*b, host, 56);
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              dev().name() + ": copy_from_host: copy of 16 bytes at offset 56 overruns a buffer of 64");
  }
  try {
    dev().copy_to_host(*b, host, 49);
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              dev().name() + ": copy_to_host: copy of 16 bytes at offset 49 overruns a buffer of 64");
  }
  // A buffer of another device is refused before any backend code runs.
  hw::CpuDevice other(hw::detect_cpu_info("other"));
  auto foreign = other.allocate(64);
  try {
    dev().copy_from_host(*foreign, host);
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_EQ(std::string(e.what()), dev().name() + ": copy_from_host dst: buffer is not on this device");
  }
  EXPECT_THROW(dev().launch(hw::KernelLaunch::softmax(*foreign, 4, 4)), dype::InputError);
  // A malformed launch names the device and the argument, on every backend.
  auto x = dev().allocate(16 * 4), w = dev().allocate(16 * 4), y = dev().allocate(8 * 4);
  try {
    dev().launch(hw::KernelLaunch::gemm(*x, *w, nullptr, *y, 4, 4, 4));
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_EQ(std::string(e.what()), dev().name() + ": gemm: y: buffer holds 32 bytes, shape needs 64");
  }
}

TEST_P(DeviceConformance, GemmEpiloguesMatchCpu) {
  using dype::kernels::Epilogue;
  const std::int64_t m = 257, k = 129, n = 65;
  const auto x = random_floats(m * k, 2), w = random_floats(k * n, 3), bias = random_floats(n, 4);
  const auto residual = random_floats(m * n, 5);
  for (auto epilogue : {Epilogue::none, Epilogue::bias_relu, Epilogue::bias_gelu, Epilogue::bias_residual}) {
    std::vector<float> want(m * n);
    kc::gemm(x, w, bias, want, {m, k, n}, epilogue, residual);
    auto bx = upload(dev(), x), bw = upload(dev(), w), bb = upload(dev(), bias), br = upload(dev(), residual);
    auto by = dev().allocate(m * n * 4);
    const hw::Buffer* r = dype::kernels::has_residual(epilogue) ? br.get() : nullptr;
    if (auto got = run(hw::KernelLaunch::gemm(*bx, *bw, bb.get(), *by, m, k, n, epilogue, r))) {
      expect_close(*got, want, 1e-3f, "gemm epilogue " + std::to_string(static_cast<int>(epilogue)));
    }
  }
}

TEST_P(DeviceConformance, GemmResidualMustBeGivenAndApart) {
  using dype::kernels::Epilogue;
  auto x = dev().allocate(16 * 4), w = dev().allocate(16 * 4), b = dev().allocate(4 * 4), y = dev().allocate(16 * 4);
  try {
    dev().launch(hw::KernelLaunch::gemm(*x, *w, b.get(), *y, 4, 4, 4, Epilogue::bias_residual));
    ADD_FAILURE() << "a residual epilogue without a residual buffer was accepted";
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("takes 4 input buffers, got 3"), std::string::npos) << e.what();
  }
  try {
    dev().launch(hw::KernelLaunch::gemm(*x, *w, b.get(), *y, 4, 4, 4, Epilogue::bias_residual, y.get()));
    ADD_FAILURE() << "the output as residual was accepted";
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("residual: must not be the output buffer"), std::string::npos) << e.what();
  }
}

TEST_P(DeviceConformance, SpmmMatchesCpu) {
  std::mt19937 rng(5);
  const std::int32_t m = 120, n = 8;
  std::vector<std::int32_t> indptr{0}, indices;
  std::vector<float> values;
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < m; ++c) {
      if (rng() % 13 == 0) {
        indices.push_back(c);
        values.push_back(static_cast<float>(rng() % 100) / 50.0f - 1.0f);
      }
    }
    indptr.push_back(static_cast<std::int32_t>(indices.size()));
  }
  const auto x = random_floats(m * n, 6);
  const auto nnz = static_cast<std::int64_t>(indices.size());
  std::vector<float> want(m * n);
  kc::spmm(dype::kernels::CsrView<std::int32_t>{m, m, indptr, indices, values}, x, n, want);
  auto a = upload(dev(), indptr), b = upload(dev(), indices), c = upload(dev(), values), bx = upload(dev(), x);
  auto y = dev().allocate(m * n * 4);
  if (auto got = run(hw::KernelLaunch::spmm(*a, *b, *c, *bx, *y, m, m, n, nnz))) expect_close(*got, want, 1e-4f, "spmm");
}

TEST_P(DeviceConformance, WindowAttentionMatchesCpu) {
  const std::int64_t seq = 300, heads = 4, head_dim = 32, window = 40;
  const auto q = random_floats(seq * heads * head_dim, 7), k = random_floats(q.size(), 8),
             v = random_floats(q.size(), 9);
  std::vector<float> want(q.size());
  kc::window_attention(q, k, v, want, {seq, heads, head_dim, window});
  auto bq = upload(dev(), q), bk = upload(dev(), k), bv = upload(dev(), v);
  auto out = dev().allocate(q.size() * 4);
  if (auto got = run(hw::KernelLaunch::window_attention(*bq, *bk, *bv, *out, seq, heads, head_dim, window))) {
    expect_close(*got, want, 1e-4f, "window_attention");
  }
}

TEST_P(DeviceConformance, SoftmaxMatchesCpu) {
  const std::int64_t rows = 9, cols = 33;
  auto want = random_floats(rows * cols, 10);
  auto b = upload(dev(), want);
  kc::softmax_rows(want, rows, cols);
  if (auto got = run(hw::KernelLaunch::softmax(*b, rows, cols))) expect_close(*got, want, 1e-5f, "softmax");
}

TEST_P(DeviceConformance, LayerNormMatchesCpu) {
  const std::int64_t rows = 7, cols = 24;
  const auto x = random_floats(rows * cols, 11), gamma = random_floats(cols, 12), beta = random_floats(cols, 13);
  std::vector<float> want(x.size());
  kc::layer_norm_rows(x, gamma, beta, want, rows, cols);
  auto bx = upload(dev(), x), bg = upload(dev(), gamma), bb = upload(dev(), beta);
  auto y = dev().allocate(x.size() * 4);
  if (auto got = run(hw::KernelLaunch::layer_norm(*bx, *bg, *bb, *y, rows, cols))) {
    expect_close(*got, want, 1e-4f, "layer_norm");
  }
}

TEST_P(DeviceConformance, TimeSourceAndCapabilitiesAreConsistent) {
  // Modelled devices say so on every Event; a device with a virtual clock reports modelled times.
  auto b = upload(dev(), random_floats(16, 14));
  std::vector<float> back(16);
  const hw::Event e = dev().copy_to_host(*b, std::as_writable_bytes(std::span<float>(back)));
  EXPECT_EQ(e.source, dev().info().time_source);
  // A device with a profile models kernel times from it; one without has no modelled time.
  if (!dev().device_profile()) {
    EXPECT_FALSE(dev().modelled_kernel_time_s(dype::kernels::OpShape{}).has_value());
  }
  if (!dev().can_run_timing_only()) {
    EXPECT_FALSE(dev().timing_only());
    EXPECT_THROW(dev().set_timing_only(true), hw::DeviceError);
    dev().set_timing_only(false);  // always allowed
  }
  if (!dev().reconfigurable()) {
    EXPECT_EQ(dev().bitstream(), nullptr);
    EXPECT_THROW(dev().load_bitstream(hw::Bitstream{}), hw::DeviceError);
    EXPECT_THROW(dev().unload_bitstream(), hw::DeviceError);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceConformance,
                         ::testing::Values("cpu", "emu_gpu", "emu_fpga", "cuda", "hip", "xrt"),
                         [](const auto& info) { return info.param; });

}  // namespace
