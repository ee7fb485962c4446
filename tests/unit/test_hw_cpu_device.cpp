// The real CPU device: kernels from kernels/cpu on host buffers, measured times, thread limit,
// launch validation, staged peer copies.
#include <vector>

#include <gtest/gtest.h>

#include "hw/cpu/cpu_device.h"
#include "hw/system.h"
#include "test_rt_common.h"

namespace {

using namespace dype::hw;

TEST(CpuDevice, GemmWithBiasReluIsMeasuredAndCorrect) {
  CpuDevice cpu(detect_cpu_info(), 1);
  EXPECT_EQ(cpu.threads(), 1);
  const std::int64_t m = 33, k = 17, n = 9;
  std::vector<float> x(m * k), w(k * n), bias(n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) * 0.1f;
  auto bx = cpu.allocate(x.size() * 4), bw = cpu.allocate(w.size() * 4), bb = cpu.allocate(n * 4);
  auto by = cpu.allocate(m * n * 4);
  cpu.copy_from_host(*bx, std::as_bytes(std::span<const float>(x)));
  cpu.copy_from_host(*bw, std::as_bytes(std::span<const float>(w)));
  cpu.copy_from_host(*bb, std::as_bytes(std::span<const float>(bias)));
  const Event e = cpu.launch(KernelLaunch::gemm(*bx, *bw, bb.get(), *by, m, k, n,
                                                dype::kernels::Epilogue::bias_relu));
  EXPECT_EQ(e.source, TimeSource::measured);
  EXPECT_GE(e.end_s, e.start_s);
  const auto y = by->as<float>();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = bias[j];
      for (std::int64_t p = 0; p < k; ++p) acc += x[i * k + p] * w[p * n + j];
      EXPECT_NEAR(y[i * n + j], std::max(acc, 0.0f), 1e-4) << i << "," << j;
    }
  }
  EXPECT_EQ(cpu.memory_used_bytes(), (x.size() + w.size() + n + m * n) * 4);
  by.reset();
  EXPECT_EQ(cpu.memory_used_bytes(), (x.size() + w.size() + n) * 4);
}

TEST(CpuDevice, LaunchValidationNamesTheArgument) {
  CpuDevice cpu(detect_cpu_info("cpuX"));
  auto x = cpu.allocate(16 * 4), w = cpu.allocate(16 * 4), y = cpu.allocate(8 * 4);
  try {
    cpu.launch(KernelLaunch::gemm(*x, *w, nullptr, *y, 4, 4, 4));
    FAIL();
  } catch (const dype::InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cpuX: gemm: y: buffer holds 32 bytes, shape needs 64");
  }
  auto s = cpu.allocate(64, AllocMode::size_only);
  EXPECT_FALSE(s->has_data());
  EXPECT_THROW(cpu.launch(KernelLaunch::softmax(*s, 4, 4)), dype::InputError);
}

TEST(CpuDevice, SoftmaxAndStagedPeerCopy) {
  auto sys = System::from_config(load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml"));
  Device& cpu = sys.device("cpu0");
  std::vector<float> v{1, 2, 3, 4, 0, 0, 0, 0};
  auto b = cpu.allocate(v.size() * 4);
  cpu.copy_from_host(*b, std::as_bytes(std::span<const float>(v)));
  cpu.launch(KernelLaunch::softmax(*b, 2, 4));
  const auto r = b->as<float>();
  EXPECT_NEAR(r[4], 0.25f, 1e-6);
  EXPECT_NEAR(r[0] + r[1] + r[2] + r[3], 1.0f, 1e-5);
  // CPU -> emulated GPU goes through host memory; the data arrives.
  Device& gpu = sys.device("gpu0");
  auto g = gpu.allocate(v.size() * 4);
  const Event e = cpu.copy_to_peer(*b, *g);
  EXPECT_EQ(e.source, TimeSource::modelled);  // one leg is modelled
  EXPECT_EQ(g->as<float>()[4], r[4]);
}

// A request's input read where it lies: the kernel sees the borrowed bytes, the owner's memory is
// kept alive by the buffer and never written, and nothing counts against the device's memory.
TEST(CpuDevice, BorrowedHostMemoryIsReadInPlaceAndNeverWritten) {
  CpuDevice cpu(detect_cpu_info("cpu0"), 1);
  const std::int64_t m = 4, k = 3, n = 2;
  auto x = std::make_shared<std::vector<float>>(
      std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const std::vector<float> w{1, 0, 0, 1, 1, 1};
  const std::weak_ptr<std::vector<float>> alive = x;
  BufferPtr bx = cpu.borrow_host(std::as_bytes(std::span<const float>(*x)), x);
  ASSERT_NE(bx, nullptr);
  x.reset();
  EXPECT_FALSE(alive.expired()) << "the buffer keeps the memory it reads";
  EXPECT_EQ(cpu.memory_used_bytes(), 0u);
  EXPECT_EQ(static_cast<const Buffer&>(*bx).host_span().data(),
            reinterpret_cast<const std::byte*>(alive.lock()->data()))
      << "read where it lies, not copied";
  auto bw = cpu.allocate(w.size() * 4), by = cpu.allocate(m * n * 4);
  cpu.copy_from_host(*bw, std::as_bytes(std::span<const float>(w)));
  cpu.launch(KernelLaunch::gemm(*bx, *bw, nullptr, *by, m, k, n));
  const auto y = by->as<float>();
  for (std::int64_t i = 0; i < m; ++i) {
    EXPECT_FLOAT_EQ(y[i * n], static_cast<float>(3 * i + 1 + 3 * i + 3)) << i;
    EXPECT_FLOAT_EQ(y[i * n + 1], static_cast<float>(3 * i + 2 + 3 * i + 3)) << i;
  }
  // Written into (a kernel's output, a copy's destination): refused, the owner's bytes unchanged.
  EXPECT_THROW(cpu.launch(KernelLaunch::gemm(*by, *bw, nullptr, *bx, m, 1, n)), dype::InputError);
  EXPECT_THROW(cpu.copy_from_host(*bx, std::as_bytes(std::span<const float>(w))), dype::InputError);
  EXPECT_FLOAT_EQ(alive.lock()->at(0), 1.0f);
  EXPECT_FLOAT_EQ(alive.lock()->at(5), 6.0f);
  bx.reset();
  EXPECT_TRUE(alive.expired());
}

// Emulated devices model their copies, so they never borrow.
TEST(CpuDevice, OnlyTheCpuBorrowsHostMemory) {
  auto sys = dype::rt::testing::emu_system(1, 1);
  const std::vector<float> x(8, 1.0f);
  for (Device* d : sys.devices()) {
    if (d->kind() == DeviceKind::cpu) continue;
    EXPECT_EQ(d->borrow_host(std::as_bytes(std::span<const float>(x)), nullptr), nullptr)
        << d->name();
  }
}

}  // namespace
