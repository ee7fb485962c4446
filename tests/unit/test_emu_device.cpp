// Emulated GPU/FPGA devices: Sextans/SWAT numbers, virtual-clock semantics, energy integration,
// results equal to the CPU's, timing-only at paper scale, bitstreams, jitter and fault injection.
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "hw/emu/emu_device.h"
#include "hw/kernel_timing_model.h"
#include "hw/system.h"
#include "hw/system_config.h"

namespace {

using namespace dype::hw;
using dype::kernels::OpKind;
using dype::kernels::OpShape;

System paper_system() {
  return System::from_config(
      load_system_config(std::string(DYPE_SOURCE_DIR) + "/configs/systems/paper-testbed-pcie4.yaml"));
}
EmuDevice& emu(System& s, const char* name) { return dynamic_cast<EmuDevice&>(s.device(name)); }

template <typename T>
BufferPtr upload(Device& d, const std::vector<T>& v) {
  BufferPtr b = d.allocate(v.size() * sizeof(T));
  d.copy_from_host(*b, std::as_bytes(std::span<const T>(v)));
  return b;
}
std::vector<float> download(Device& d, const Buffer& b) {
  std::vector<float> out(b.size_bytes() / sizeof(float));
  d.copy_to_host(b, std::as_writable_bytes(std::span<float>(out)));
  return out;
}

OpShape spmm_shape(std::int64_t m, std::int64_t nnz, std::int64_t n) {
  OpShape s;
  s.kind = OpKind::spmm;
  s.m = s.k = m;
  s.nnz = nnz;
  s.n = n;
  return s;
}

TEST(EmuTiming, SextansKnownCase) {
  // nnz = 1e6, M = 1e4, N = 64 on 640 MACs at 215 MHz: 113,000 cycles = 0.525581 ms (+20 us launch).
  const Bitstream b = load_bitstream(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-swat.yaml");
  BitstreamKernel k = *b.find(OpKind::spmm);
  k.launch_overhead_s = 0;
  EXPECT_NEAR(timing::sextans_spmm_s(k, 10000, 1000000, 64), 113000.0 / 215e6, 1e-12);
  EXPECT_NEAR(timing::sextans_spmm_s(k, 10000, 1000000, 64) * 1e3, 0.525581, 1e-6);
  // Paper S1 (230K nodes, 120M edges, 600 features): (120e6 + 13 * 230e3) * 600 / 640 / 215e6.
  EXPECT_NEAR(timing::sextans_spmm_s(k, 230000, 120000000, 600), 0.536, 0.001);
  k.scale_c = 0.5;  // the paper's C scales linearly
  EXPECT_NEAR(timing::sextans_spmm_s(k, 10000, 1000000, 64), 0.5 * 113000.0 / 215e6, 1e-12);
}

TEST(EmuTiming, SwatKnownCase) {
  const Bitstream b = load_bitstream(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-swat.yaml");
  BitstreamKernel k = *b.find(OpKind::window_attention);
  k.launch_overhead_s = 0;
  // seq_len 4096, w 1024: (4096 * 201 + 904) * 1 = 824,200 cycles at 421 MHz = 1.957720 ms.
  EXPECT_NEAR(timing::swat_window_attention_s(k, 4096, 1024) * 1e3, 1.957720, 1e-6);
  // w = 512 halves it.
  EXPECT_NEAR(timing::swat_window_attention_s(k, 4096, 512), timing::swat_window_attention_s(k, 4096, 1024) / 2, 1e-12);
}

TEST(EmuTiming, GpuRooflineBehaves) {
  const DeviceProfile mi210 = load_device_profile(std::string(DYPE_SOURCE_DIR) + "/configs/devices/amd-mi210.yaml");
  const auto& g = mi210.ops.at(OpKind::gemm);
  // Large GEMM: compute bound near peak * efficiency.
  const double t = timing::roofline_gemm_s(mi210, g, 8192, 8192, 8192);
  EXPECT_NEAR(t, g.launch_overhead_s + 2.0 * 8192.0 * 8192 * 8192 / (22.6e12 * 0.7), 1e-6);
  // Sparser (same nnz spread over more rows/cols) SpMM reuses less cache: slower per nnz.
  const auto& sp = mi210.ops.at(OpKind::spmm);
  const double dense = timing::roofline_spmm_s(mi210, sp, spmm_shape(10000, 10000000, 128));
  const double sparse = timing::roofline_spmm_s(mi210, sp, spmm_shape(2000000, 10000000, 128));
  EXPECT_GT(sparse, dense);
  // Power-law rows (load imbalance) cost bandwidth on a memory-bound shape.
  OpShape skewed = spmm_shape(2000000, 10000000, 128);
  skewed.degree_skew = 64;
  EXPECT_GT(timing::roofline_spmm_s(mi210, sp, skewed), sparse);
  // Dense attention grows with seq_len^2, SWAT linearly.
  OpShape a;
  a.kind = OpKind::window_attention;
  a.heads = 12;
  a.head_dim = 64;
  a.window = 512;
  a.seq_len = 4096;
  const double t1 = timing::roofline_dense_attention_s(mi210, mi210.ops.at(OpKind::window_attention), a);
  a.seq_len = 8192;
  const double t2 = timing::roofline_dense_attention_s(mi210, mi210.ops.at(OpKind::window_attention), a);
  EXPECT_GT(t2 / t1, 3.5);
}

TEST(EmuTiming, GpuSpmmPaysRowPassesAndWholeGatherLines) {
  const DeviceProfile mi210 = load_device_profile(std::string(DYPE_SOURCE_DIR) + "/configs/devices/amd-mi210.yaml");
  OpModelParams p = mi210.ops.at(OpKind::spmm);
  ASSERT_EQ(p.wavefront, 64);
  // Very sparse rows (S4-like, 1.4 nnz per row): the row passes dominate, so time follows the
  // passes: 64 columns take one, 65 two; 20 columns cost as much row work as 64.
  const OpShape base = spmm_shape(3500000, 5000000, 64);
  OpShape wide = base, narrow = base;
  wide.n = 65;
  narrow.n = 20;
  const double row_pass = p.row_latency_s / p.concurrent_rows;
  const double t64 = timing::roofline_spmm_s(mi210, p, base);
  EXPECT_NEAR(timing::roofline_spmm_s(mi210, p, wide) - t64, 3500000 * row_pass, 0.2 * 3500000 * row_pass);
  EXPECT_GT(timing::roofline_spmm_s(mi210, p, narrow), 3500000 * row_pass);
  // Without the row terms and the gather granularity the formula is the bandwidth roofline; with
  // them a 20-float row (80 B) moves a whole 128 B line per gather.
  OpModelParams plain = p;
  plain.row_latency_s = plain.concurrent_rows = plain.wavefront = plain.gather_bytes = 0;
  OpModelParams lines = plain;
  lines.gather_bytes = 128;
  const OpShape gathers = spmm_shape(2000000, 40000000, 20);  // X (160 MB) misses the 8 MB L2
  EXPECT_GT(timing::roofline_spmm_s(mi210, lines, gathers), 1.3 * timing::roofline_spmm_s(mi210, plain, gathers));
  // The two row keys only make sense together.
  const std::string dir = ::testing::TempDir() + "dype_emu_rowkeys_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ifstream in(std::string(DYPE_SOURCE_DIR) + "/configs/devices/amd-mi210.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find(", concurrent_rows: 1664");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, std::strlen(", concurrent_rows: 1664"));
  std::ofstream(dir + "/gpu.yaml") << text;
  try {
    load_device_profile(dir + "/gpu.yaml");
    ADD_FAILURE() << "row_latency_us without concurrent_rows was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("concurrent_rows"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(EmuDevice, VirtualClockDependenciesAndBusyDevice) {
  System sys = paper_system();
  EmuDevice& g0 = emu(sys, "gpu0");
  EmuDevice& g1 = emu(sys, "gpu1");
  const std::int64_t m = 256, k = 128, n = 64;
  std::vector<float> x(m * k, 1.0f), w(k * n, 0.5f);
  auto bx = upload(g0, x);
  auto bw = upload(g0, w);
  const double after_upload = g0.clock_s();
  EXPECT_GT(after_upload, 0.0);
  auto by = g0.allocate(m * n * 4);
  auto bz = g0.allocate(m * n * 4);
  const Event e1 = g0.launch(KernelLaunch::gemm(*bx, *bw, nullptr, *by, m, k, n));
  EXPECT_EQ(e1.source, TimeSource::modelled);
  EXPECT_DOUBLE_EQ(e1.start_s, after_upload);  // the device was busy uploading
  OpShape s;
  s.kind = OpKind::gemm;
  s.m = m;
  s.k = k;
  s.n = n;
  EXPECT_DOUBLE_EQ(e1.duration_s(), g0.modelled_time_s(s));
  // Second op starts when the device is free.
  const Event e2 = g0.launch(KernelLaunch::gemm(*bx, *bw, nullptr, *bz, m, k, n));
  EXPECT_DOUBLE_EQ(e2.start_s, e1.end_s);

  // On another device, an op waits for the events it depends on and for its inputs' ready time.
  std::vector<float> w2(n * n, 0.25f);
  auto b1w = upload(g1, w2);
  auto b1x = g1.allocate(m * n * 4);
  auto b1y = g1.allocate(m * n * 4);
  const Event xfer = g0.copy_to_peer(*bz, *b1x);
  EXPECT_GE(xfer.start_s, e2.end_s);            // input ready
  EXPECT_DOUBLE_EQ(b1x->ready_at_s(), xfer.end_s);
  EXPECT_DOUBLE_EQ(g0.clock_s(), xfer.end_s);   // a transfer occupies both ends
  EXPECT_DOUBLE_EQ(g1.clock_s(), xfer.end_s);
  const Event e3 = g1.launch(KernelLaunch::gemm(*b1x, *b1w, nullptr, *b1y, m, n, n));
  EXPECT_DOUBLE_EQ(e3.start_s, xfer.end_s);
  // An explicit later event delays the start.
  const Event late{0.0, e3.end_s + 1.0, TimeSource::modelled, 0.0};
  const Event e4 = g1.launch(KernelLaunch::gemm(*b1x, *b1w, nullptr, *b1y, m, n, n), {&late, 1});
  EXPECT_DOUBLE_EQ(e4.start_s, e3.end_s + 1.0);
  // Results are right: every entry of x*w is k*0.5, then * n * 0.25.
  const auto out = download(g1, *b1y);
  EXPECT_FLOAT_EQ(out[0], k * 0.5f * n * 0.25f);
}

// `transfers: overlap`: copies run on the device's copy engine, beside its kernels, and take the
// earliest gap after they are ready (a later-issued copy that is ready sooner goes first). A peer
// copy needs both engines free at once. Energy: a copy adds its increment above idle.
TEST(EmuDevice, OverlappingCopiesRunBesideKernelsOnACopyEngine) {
  System sys = paper_system();
  EmuDevice& g0 = emu(sys, "gpu0");
  EmuDevice& g1 = emu(sys, "gpu1");
  EmuOptions o;
  o.overlap_copies = true;
  EmuDevice a(g0.info(), g0.profile(), o), b(g1.info(), g1.profile(), o);
  a.attach(g0.topology(), g0.topology_index());
  b.attach(g1.topology(), g1.topology_index());
  a.set_timing_only(true);  // size-only buffers: only the timeline matters here
  b.set_timing_only(true);
  const std::int64_t m = 16384, k = 1024, n = 1024;
  auto x = a.allocate(m * k * 4), w = a.allocate(k * n * 4), y = a.allocate(m * n * 4), in = a.allocate(65536);
  const Event kern = a.launch(KernelLaunch::gemm(*x, *w, nullptr, *y, m, k, n));
  EXPECT_DOUBLE_EQ(kern.start_s, 0.0);
  // The next request's input arrives while the kernel runs.
  std::vector<std::byte> host(65536);
  const Event up = a.copy_from_host(*in, host);
  EXPECT_DOUBLE_EQ(up.start_s, 0.0);
  ASSERT_LT(up.end_s, kern.end_s);
  // The result's download waits for the kernel; an upload issued after it but ready at once
  // takes the gap before it.
  std::vector<std::byte> out(static_cast<std::size_t>(m * n * 4));
  const Event down = a.copy_to_host(*y, out);
  EXPECT_DOUBLE_EQ(down.start_s, std::max(kern.end_s, up.end_s));
  auto in2 = a.allocate(4096);
  std::vector<std::byte> small(4096);
  const Event up2 = a.copy_from_host(*in2, small);
  ASSERT_LE(up.end_s + up2.duration_s(), down.start_s);
  EXPECT_DOUBLE_EQ(up2.start_s, up.end_s);
  // Kernels never wait for copies they do not read.
  const Event kern2 = a.launch(KernelLaunch::gemm(*x, *w, nullptr, *y, m, k, n));
  EXPECT_DOUBLE_EQ(kern2.start_s, kern.end_s);
  // A peer copy waits until both engines are free.
  auto dst = b.allocate(m * n * 4);
  std::vector<std::byte> busy(static_cast<std::size_t>(m * n * 4));
  auto bb = b.allocate(m * n * 4);
  const Event b_up = b.copy_from_host(*bb, busy);
  const Event p2p = a.copy_to_peer(*y, *dst);
  EXPECT_GE(p2p.start_s, b_up.end_s - 1e-15);
  EXPECT_GE(p2p.start_s, kern2.end_s - 1e-15);
  // Copies draw their increment above idle; the idle share is the time the kernels leave.
  const double horizon = a.clock_s();
  const EnergyReport r = a.energy_until(horizon);
  const PowerStates& p = a.info().power;
  EXPECT_NEAR(r.idle_j, p.idle_w * (horizon - kern.duration_s() - kern2.duration_s()), 1e-9);
  EXPECT_NEAR(up.energy_j, (p.transfer_w - p.idle_w) * up.duration_s(), 1e-12);
}

TEST(EmuDevice, EnergyIntegratesPowerStates) {
  System sys = paper_system();
  EmuDevice& f = emu(sys, "fpga0");
  auto indptr = f.allocate(4 * 1001), indices = f.allocate(4 * 10000), values = f.allocate(4 * 10000);
  f.set_timing_only(true);  // timing only: buffers' contents do not matter
  auto x = f.allocate(4 * 1000 * 32), y = f.allocate(4 * 1000 * 32);
  const Event e = f.launch(KernelLaunch::spmm(*indptr, *indices, *values, *x, *y, 1000, 1000, 32, 10000));
  // U280 running Sextans SpMM: 19.5 W static + 55 W dynamic.
  EXPECT_NEAR(e.energy_j, 74.5 * e.duration_s(), 1e-12);
  const double horizon = e.end_s + 1.0;
  const EnergyReport r = f.energy_until(horizon);
  EXPECT_NEAR(r.execute_j, 74.5 * e.duration_s(), 1e-12);
  EXPECT_NEAR(r.idle_j, 19.5 * (horizon - e.duration_s()), 1e-9);
  EXPECT_DOUBLE_EQ(r.transfer_j, 0.0);
  EXPECT_NEAR(r.total_j(), r.idle_j + r.execute_j, 1e-12);
  // Window attention draws 19.5 + 50.2 W.
  EXPECT_DOUBLE_EQ(f.info().power.execute_w_for(OpKind::window_attention), 69.7);
  // Transfers draw transfer power.
  std::vector<float> host(1000);
  const Event up = f.copy_from_host(*x, std::as_bytes(std::span<const float>(host)));
  EXPECT_NEAR(up.energy_j, 25.0 * up.duration_s(), 1e-12);
  EXPECT_NEAR(f.energy()->transfer_j, up.energy_j, 1e-15);
}

TEST(EmuDevice, ResultsEqualCpu) {
  System sys = paper_system();
  Device& cpu = sys.device("cpu0");
  // A small random CSR graph and features.
  std::mt19937 rng(7);
  const std::int32_t m = 300, n = 16;
  std::vector<std::int32_t> indptr{0}, indices;
  std::vector<float> values;
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < m; ++c) {
      if (rng() % 17 == 0) {
        indices.push_back(c);
        values.push_back(static_cast<float>(rng() % 100) / 50.0f - 1.0f);
      }
    }
    indptr.push_back(static_cast<std::int32_t>(indices.size()));
  }
  std::vector<float> x(m * n);
  for (auto& v : x) v = static_cast<float>(rng() % 1000) / 500.0f - 1.0f;
  const auto nnz = static_cast<std::int64_t>(indices.size());
  auto run = [&](Device& d) {
    auto a = upload(d, indptr), b = upload(d, indices), c = upload(d, values), bx = upload(d, x);
    auto y = d.allocate(m * n * 4);
    d.launch(KernelLaunch::spmm(*a, *b, *c, *bx, *y, m, m, n, nnz));
    return download(d, *y);
  };
  const auto ref = run(cpu);
  // Plain reference too, so a wrong shared kernel cannot pass.
  for (int r = 0; r < m; r += 37) {
    float acc = 0;
    for (int e = indptr[r]; e < indptr[r + 1]; ++e) acc += values[e] * x[indices[e] * n + 3];
    EXPECT_NEAR(ref[r * n + 3], acc, 1e-4);
  }
  EXPECT_EQ(run(sys.device("gpu0")), ref);
  EXPECT_EQ(run(sys.device("fpga1")), ref);
}

TEST(EmuDevice, TimingOnlyPaperScaleIsFast) {
  System sys = paper_system();
  EmuDevice& f = emu(sys, "fpga0");
  EmuDevice& g = emu(sys, "gpu0");
  const auto t0 = std::chrono::steady_clock::now();
  for (EmuDevice* d : {&f, &g}) {
    d->set_timing_only(true);
    // S1: 230K nodes, 120M edges, 600 features — ~1.5 GB of buffers that are never materialised.
    const std::int64_t m = 230000, nnz = 120000000, n = 600;
    auto ip = d->allocate(4 * (m + 1)), ix = d->allocate(4 * nnz), v = d->allocate(4 * nnz);
    auto x = d->allocate(4 * m * n), y = d->allocate(4 * m * n);
    EXPECT_FALSE(x->has_data());
    const Event e = d->launch(KernelLaunch::spmm(*ip, *ix, *v, *x, *y, m, m, n, nnz));
    EXPECT_GT(e.duration_s(), 0.01);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall, 1.0);
  // The FPGA's time is the Sextans figure (+ launch overhead).
  EXPECT_NEAR(f.clock_s(), 0.536, 0.002);
}

TEST(EmuDevice, FpgaWithoutBitstreamSupportsNothing) {
  System sys = paper_system();
  EmuDevice& f = emu(sys, "fpga2");
  EXPECT_TRUE(f.supports(OpKind::spmm));
  EXPECT_TRUE(f.supports(OpKind::window_attention));
  EXPECT_FALSE(f.supports(OpKind::gemm));
  f.unload_bitstream();
  for (OpKind op : dype::kernels::kAllOpKinds) EXPECT_FALSE(f.supports(op));
  auto a = f.allocate(64), b = f.allocate(64);
  try {
    f.launch(KernelLaunch::softmax(*a, 4, 4));
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.device(), "fpga2");
    EXPECT_NE(std::string(e.what()).find("no bitstream loaded"), std::string::npos);
  }
  // Load the GEMM image: now gemm works, window attention does not; loading takes time.
  const Bitstream gemm = load_bitstream(std::string(DYPE_SOURCE_DIR) + "/configs/bitstreams/u280-sextans-gemm.yaml");
  const double before = f.clock_s();
  const Event load = f.load_bitstream(gemm);
  EXPECT_NEAR(load.duration_s(), 1.5, 1e-12);
  EXPECT_DOUBLE_EQ(f.clock_s(), before + 1.5);
  EXPECT_TRUE(f.supports(OpKind::gemm));
  EXPECT_FALSE(f.supports(OpKind::window_attention));
  // A GPU refuses bitstreams; a bitstream for another board is refused.
  EXPECT_THROW(emu(sys, "gpu0").load_bitstream(gemm), DeviceError);
  Bitstream other = gemm;
  other.profile_id = "xilinx-u250";
  EXPECT_THROW(f.load_bitstream(other), DeviceError);
}

TEST(EmuDevice, FaultInjectionNamesTheDevice) {
  System sys = paper_system();
  EmuDevice& g = emu(sys, "gpu1");
  g.set_timing_only(true);
  auto x = g.allocate(4 * 64), w = g.allocate(4 * 64), y = g.allocate(4 * 64);
  const auto launch = KernelLaunch::gemm(*x, *w, nullptr, *y, 8, 8, 8);
  g.inject_fault(1, "ECC error");
  EXPECT_NO_THROW(g.launch(launch));  // one more succeeds
  const double clock = g.clock_s();
  try {
    g.launch(launch);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.device(), "gpu1");
    EXPECT_EQ(std::string(e.what()), "gpu1: ECC error");
  }
  EXPECT_DOUBLE_EQ(g.clock_s(), clock);  // the failed op took no time
  EXPECT_NO_THROW(g.launch(launch));     // one-shot
}

TEST(EmuDevice, JitterIsSeededAndOffByDefault) {
  System sys = paper_system();
  EmuDevice& g = emu(sys, "gpu0");
  g.set_timing_only(true);
  auto x = g.allocate(4 * 4096), w = g.allocate(4 * 4096), y = g.allocate(4 * 4096);
  const auto l = KernelLaunch::gemm(*x, *w, nullptr, *y, 64, 64, 64);
  const double t = g.launch(l).duration_s();
  EXPECT_DOUBLE_EQ(g.launch(l).duration_s(), t);
  auto sample = [&](std::uint64_t seed) {
    g.set_jitter(0.1, seed);
    std::vector<double> v;
    for (int i = 0; i < 50; ++i) v.push_back(g.launch(l).duration_s());
    return v;
  };
  const auto a = sample(3), b = sample(3), c = sample(4);
  // Durations are end - start on an advancing clock: equal up to rounding.
  double diff_ab = 0, diff_ac = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff_ab = std::max(diff_ab, std::abs(a[i] - b[i]) / t);
    diff_ac = std::max(diff_ac, std::abs(a[i] - c[i]) / t);
  }
  EXPECT_LT(diff_ab, 1e-9);
  EXPECT_GT(diff_ac, 1e-3);
  double mean = 0;
  for (double v : a) mean += v / a.size();
  EXPECT_NEAR(mean / t, 1.0, 0.06);
}

TEST(EmuDevice, MemoryCapacityIsEnforced) {
  System sys = paper_system();
  EmuDevice& f = emu(sys, "fpga0");
  f.set_timing_only(true);
  auto big = f.allocate(6ull << 30);
  EXPECT_THROW(f.allocate(3ull << 30), DeviceError);  // 8 GiB HBM2
  big.reset();
  EXPECT_NO_THROW(f.allocate(3ull << 30));
}

TEST(EmuDevice, PeerCopyOfARegionLandsAtItsOffsetAndIsTimedByItsBytes) {
  System sys = paper_system();
  EmuDevice& a = emu(sys, "gpu0");
  EmuDevice& b = emu(sys, "gpu1");
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  auto src = a.allocate(v.size() * 4), dst = b.allocate(v.size() * 4);
  a.copy_from_host(*src, std::as_bytes(std::span<const float>(v)));
  b.copy_from_host(*dst, std::as_bytes(std::span<const float>(std::vector<float>(1000, -1.0f))));
  // Floats 100..399 of src into floats 600..899 of dst.
  const Event e = a.copy_to_peer(*src, *dst, CopyRegion{400, 2400, 1200});
  const int ia = a.topology_index(), ib = b.topology_index();
  EXPECT_NEAR(e.duration_s(), a.topology()->estimate(std::span<const int>(&ia, 1), std::span<const int>(&ib, 1), 1200).time_s, 1e-15);
  std::vector<float> got(1000);
  b.copy_to_host(*dst, std::as_writable_bytes(std::span<float>(got)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float want = i >= 600 && i < 900 ? static_cast<float>(i - 500) : -1.0f;
    ASSERT_EQ(got[i], want) << i;
  }
  // Within one device's memory: a local copy, no link time.
  auto same = a.allocate(v.size() * 4);
  const Event local = a.copy_to_peer(*src, *same, CopyRegion{0, 0, 4000});
  EXPECT_EQ(local.duration_s(), 0.0);
  // A region past either end is refused, naming the side and the sizes.
  try {
    a.copy_to_peer(*src, *dst, CopyRegion{0, 3000, 2000});
    FAIL() << "overrun accepted";
  } catch (const dype::InputError& err) {
    EXPECT_NE(std::string(err.what()).find("copy_to_peer destination"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("copy of 2000 bytes at offset 3000 overruns a buffer of 4000"), std::string::npos) << err.what();
  }
  EXPECT_THROW(a.copy_to_peer(*src, *dst, CopyRegion{3999, 0, 2}), dype::InputError);
}

}  // namespace
