#include "perfmodel/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>

#include "hw/cpu/cpu_device.h"
#include "graph/gather_locality.h"
#include "hw/device_profile.h"
#include "hw/kernel_launch.h"
#include "kernels/cpu/isa.h"
#include "common/error.h"
#include "graph/characteristics.h"

namespace dype::perf {

using kernels::OpKind;
using kernels::OpShape;

namespace {

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Device buffers for one point, filled from host data or with a constant (timing does not depend
// on the values of dense operands). Size-only buffers (timing-only runs) are never written. A real
// GPU's buffers are not host-visible but hold data all the same: they are written by a copy (that
// is why has_data(), which asks for host-visible storage, is not the test here).
struct PointBuffers {
  hw::AllocMode mode = hw::AllocMode::data;
  std::vector<hw::BufferPtr> owned;
  hw::Buffer& add(hw::Device& dev, std::size_t bytes) {
    owned.push_back(dev.allocate(std::max<std::size_t>(bytes, 4), mode));
    return *owned.back();
  }
  template <typename T>
  void upload(hw::Device& dev, hw::Buffer& buf, std::span<const T> data) const {
    if (mode == hw::AllocMode::size_only) return;
    dev.copy_from_host(buf, std::as_bytes(data));
  }
  void fill(hw::Device& dev, hw::Buffer& buf, float value) const {
    if (mode == hw::AllocMode::size_only) return;
    auto span = buf.host_span();
    if (!span.empty()) {  // host-visible (cpu, emu): fill in place, no second copy of big operands
      std::fill(buf.as<float>().begin(), buf.as<float>().end(), value);
      return;
    }
    const std::vector<float> host(buf.size_bytes() / sizeof(float), value);
    upload<float>(dev, buf, host);
  }
};

std::size_t fbytes(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(float); }

// The graph's CSR buffers, the first three of `bufs`, sized for `shape` and filled from `a` (left
// empty for size-only buffers, where `a` is too).
void add_graph(hw::Device& dev, PointBuffers& bufs, const OpShape& shape, const kernels::CsrI32& a) {
  auto& indptr = bufs.add(dev, sizeof(std::int32_t) * static_cast<std::size_t>(shape.m + 1));
  auto& indices = bufs.add(dev, sizeof(std::int32_t) * static_cast<std::size_t>(shape.nnz));
  auto& values = bufs.add(dev, fbytes(shape.nnz));
  bufs.upload<std::int32_t>(dev, indptr, a.indptr);
  bufs.upload<std::int32_t>(dev, indices, a.indices);
  bufs.upload<float>(dev, values, a.values);
}

// X and Y for feature length `n` over the graph whose CSR buffers are the first three of `bufs`
// (any other buffers there are freed first): the launch to time, `shape` updated to `n`.
hw::KernelLaunch spmm_at_width(hw::Device& dev, PointBuffers& bufs, OpShape& shape, std::int64_t n) {
  bufs.owned.resize(3);
  shape.n = n;
  auto& x = bufs.add(dev, fbytes(shape.k * n));
  auto& y = bufs.add(dev, fbytes(shape.m * n));
  bufs.fill(dev, x, 0.5f);
  return hw::KernelLaunch::spmm(*bufs.owned[0], *bufs.owned[1], *bufs.owned[2], x, y, shape.m, shape.k, n, shape.nnz,
                                4, shape.degree_skew);
}

// Sets up one synthetic point on the device and returns the launch to time. `shape` receives the
// characteristics actually run (exact nnz and skew of the materialised matrix).
hw::KernelLaunch prepare(hw::Device& dev, const InputSpec& spec, bool timing_only,
                         PointBuffers& bufs, OpShape& shape) {
  shape = spec.shape;
  bufs.mode = timing_only ? hw::AllocMode::size_only : hw::AllocMode::data;
  switch (spec.shape.kind) {
    case OpKind::spmm: {
      kernels::CsrI32 a;
      if (timing_only) {
        shape.degree_skew = estimated_skew(spec);
      } else {
        a = materialise_csr(spec);
        shape.nnz = a.nnz();
        shape.degree_skew = kernels::degree_skew(a.indptr);
        shape.locality = kernels::gather_locality(a.indices, a.cols);
      }
      add_graph(dev, bufs, shape, a);
      return spmm_at_width(dev, bufs, shape, shape.n);
    }
    case OpKind::gemm: {
      auto& x = bufs.add(dev, fbytes(shape.m * shape.k));
      auto& w = bufs.add(dev, fbytes(shape.k * shape.n));
      auto& y = bufs.add(dev, fbytes(shape.m * shape.n));
      bufs.fill(dev, x, 0.5f);
      bufs.fill(dev, w, 0.25f);
      return hw::KernelLaunch::gemm(x, w, nullptr, y, shape.m, shape.k, shape.n);
    }
    case OpKind::window_attention: {
      const std::int64_t elems = shape.seq_len * shape.heads * shape.head_dim;
      auto& q = bufs.add(dev, fbytes(elems));
      auto& k = bufs.add(dev, fbytes(elems));
      auto& v = bufs.add(dev, fbytes(elems));
      auto& out = bufs.add(dev, fbytes(elems));
      bufs.fill(dev, q, 0.1f);
      bufs.fill(dev, k, 0.2f);
      bufs.fill(dev, v, 0.3f);
      return hw::KernelLaunch::window_attention(q, k, v, out, shape.seq_len, shape.heads,
                                                shape.head_dim, shape.window);
    }
    case OpKind::softmax: {
      auto& x = bufs.add(dev, fbytes(shape.m * shape.n));
      bufs.fill(dev, x, 0.5f);
      return hw::KernelLaunch::softmax(x, shape.m, shape.n);
    }
    case OpKind::layer_norm: {
      auto& x = bufs.add(dev, fbytes(shape.m * shape.n));
      auto& gamma = bufs.add(dev, fbytes(shape.n));
      auto& beta = bufs.add(dev, fbytes(shape.n));
      auto& y = bufs.add(dev, fbytes(shape.m * shape.n));
      bufs.fill(dev, x, 0.5f);
      bufs.fill(dev, gamma, 1.0f);
      bufs.fill(dev, beta, 0.0f);
      return hw::KernelLaunch::layer_norm(x, gamma, beta, y, shape.m, shape.n);
    }
  }
  throw Error("profiler: unknown kernel");
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Devices that can (those timed by a device profile) run timing-only while profiling (no
// arithmetic, size-only buffers); restored afterwards.
class TimingOnlyScope {
 public:
  explicit TimingOnlyScope(hw::Device& dev) : dev_(dev.can_run_timing_only() ? &dev : nullptr) {
    if (dev_ != nullptr) {
      was_ = dev_->timing_only();
      dev_->set_timing_only(true);
    }
  }
  ~TimingOnlyScope() {
    if (dev_ != nullptr) dev_->set_timing_only(was_);
  }
  TimingOnlyScope(const TimingOnlyScope&) = delete;
  TimingOnlyScope& operator=(const TimingOnlyScope&) = delete;
  bool active() const { return dev_ != nullptr; }

 private:
  hw::Device* dev_;
  bool was_ = false;
};

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

double timed_launch(hw::Device& device, const hw::KernelLaunch& launch, ProfileClock clock) {
  const auto* cpu = dynamic_cast<const hw::CpuDevice*>(&device);
  if (clock == ProfileClock::cpu_time && cpu != nullptr &&
      device.info().time_source == hw::TimeSource::measured) {
    const double c0 = process_cpu_s();
    device.launch(launch);
    const double c1 = process_cpu_s();
    return (c1 - c0) / std::max(1, cpu->threads());
  }
  return device.launch(launch).duration_s();
}

DeviceClass device_class_of(hw::DeviceKind kind) {
  switch (kind) {
    case hw::DeviceKind::cpu: return DeviceClass::cpu;
    case hw::DeviceKind::gpu: return DeviceClass::gpu;
    case hw::DeviceKind::fpga: return DeviceClass::fpga;
  }
  return DeviceClass::cpu;
}

FeatureParams feature_params_for(const hw::Device& device) {
  FeatureParams p;
  if (const hw::DeviceProfile* profile = device.device_profile()) {
    if (profile->cache_bytes > 0) p.llc_bytes = profile->cache_bytes;
    if (const hw::Bitstream* bs = device.bitstream()) {
      if (const auto* k = bs->find(OpKind::spmm); k && k->frequency_mhz > 0 && k->mac_units > 0) {
        p.sextans_f_mhz = k->frequency_mhz;
        p.sextans_nm = k->mac_units;
      }
      if (const auto* k = bs->find(OpKind::window_attention); k && k->frequency_mhz > 0) {
        p.swat_f_mhz = k->frequency_mhz;
        if (k->pipeline_cycles > 0) p.swat_t_pipeline = k->pipeline_cycles;
        if (k->init_cycles > 0) p.swat_t_init = k->init_cycles;
      }
    }
    return p;
  }
  if (device.kind() == hw::DeviceKind::cpu) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l3 > 0) p.llc_bytes = static_cast<double>(l3);
    if (l2 > 0) p.l2_bytes = static_cast<double>(l2);
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    if (l1 > 0) p.l1_bytes = static_cast<double>(l1);
    if (const auto* cpu = dynamic_cast<const hw::CpuDevice*>(&device)) p.threads = cpu->threads();
    switch (kernels::cpu::active_isa()) {
      case kernels::cpu::Isa::avx512: p.simd_floats = 16; break;
      case kernels::cpu::Isa::avx2: p.simd_floats = 8; break;
      case kernels::cpu::Isa::scalar: p.simd_floats = 4; break;  // compilers still vectorise SSE
    }
  }
  return p;
}

SyntheticRanges default_ranges(DeviceClass cls, OpKind kind, bool modelled) {
  SyntheticRanges r;
  // A GPU's SpMM runs aligned widths (N % 4 == 0) in float4s and others a float per lane, and GNN
  // layers use aligned widths: half the profiled widths are multiples of 8, so the fit sees both.
  if (cls == DeviceClass::gpu && kind == OpKind::spmm) r.aligned_feature_share = 0.5;
  if (modelled) {
    // Timing-only: every shape of the workloads, no memory needed.
    r.allow_timing_only = true;
    r.max_work = 1e14;
    return r;
  }
  // Measured: keep each timed run to ~0.2 s or less on a small, shared CPU so a 180 s budget buys
  // enough points for three kernels, and inputs within a few hundred MB. The caps are multiply-adds
  // (work_of); SpMM's are DRAM-latency bound once X leaves the cache, hence the lower cap (still
  // high enough that X reaches ~180 MB, past the effective LLC).
  r.allow_timing_only = false;
  r.max_bytes = 384.0 * 1024 * 1024;
  const bool cpu = cls == DeviceClass::cpu;
  switch (kind) {
    case OpKind::spmm: r.max_work = cpu ? 3e8 : 1e10; break;
    case OpKind::gemm: r.max_work = cpu ? 1.5e9 : 1e12; break;
    case OpKind::window_attention:
      r.max_work = cpu ? 6e8 : 1e12;
      // Few heads on a CPU: the full seq_len x window range stays affordable per run.
      if (cpu) r.heads = {1, 2, 4, 8};
      break;
    case OpKind::softmax:
    case OpKind::layer_norm: r.max_work = cpu ? 5e7 : 1e10; break;
  }
  return r;
}

std::vector<Sample> collect_samples(hw::Device& device, OpKind kind, const ProfileOptions& options,
                                    double budget_s, double total_elapsed_s) {
  if (!device.supports(kind)) {
    throw Error(device.name() + " does not support " + std::string(kernels::to_string(kind)));
  }
  TimingOnlyScope timing_only(device);
  const bool modelled = device.info().time_source == hw::TimeSource::modelled;
  const DeviceClass cls = device_class_of(device.kind());
  SyntheticRanges ranges =
      options.ranges ? options.ranges(cls, kind, modelled) : default_ranges(cls, kind, modelled);
  // Leave room for what the device already holds (and allocator slack).
  if (ranges.max_device_bytes <= 0 && device.info().memory_bytes > 0)
    ranges.max_device_bytes = 0.8 * static_cast<double>(device.info().memory_bytes);
  const auto specs = generate_specs(kind, ranges, options.max_points, options.seed);
  const auto t0 = clock_type::now();
  std::vector<Sample> samples;
  TimingPolicy policy = options.timing;
  const auto full = [&] { return static_cast<int>(samples.size()) >= options.max_points; };
  // Times `launch` and keeps the sample, unless the run took no time (an empty shape).
  const auto record = [&](const OpShape& shape, const hw::KernelLaunch& launch) {
    const TimingResult r = time_repeated([&] { return timed_launch(device, launch, options.clock); }, policy);
    if (!(r.median_s > 0)) return;  // a zero-time run carries no information
    samples.push_back({shape, r.median_s});
    if (options.on_progress) {
      ProfileProgress p;
      p.kind = kind;
      p.point = static_cast<int>(samples.size());
      p.max_points = options.max_points;
      p.kernel_elapsed_s = since(t0);
      p.kernel_budget_s = budget_s;
      p.total_elapsed_s = total_elapsed_s + p.kernel_elapsed_s;
      p.total_budget_s = options.budget_s;
      p.sample = &samples.back();
      p.timing = &r;
      options.on_progress(p);
    }
  };
  // Never let one point overrun what is left of this kernel's share.
  const auto limit_point = [&] {
    policy.max_total_s = std::min(options.timing.max_total_s, std::max(0.05, (budget_s - since(t0)) / 4));
  };
  for (std::size_t i = 0; i < specs.size() && !full() && since(t0) < budget_s; ++i) {
    limit_point();
    PointBuffers bufs;
    OpShape shape;
    record(shape, prepare(device, specs[i], timing_only.active(), bufs, shape));  // shape is set first
    if (kind != OpKind::spmm || timing_only.active()) continue;
    // The same graph at other feature lengths: materialising it cost far more than timing it. Each
    // width frees the previous X and Y (spmm_at_width), so no launch outlives its buffers.
    for (std::int64_t n : other_feature_lengths(specs[i], shape.nnz, ranges, options.spmm_widths_per_graph - 1)) {
      if (full() || since(t0) >= budget_s) break;
      limit_point();
      OpShape wide = shape;
      record(wide, spmm_at_width(device, bufs, wide, n));
    }
  }
  return samples;
}

ModelStore profile_device(hw::Device& device, const std::string& device_model,
                          const ProfileOptions& options) {
  const auto t0 = clock_type::now();
  ModelStore store;
  store.device_model = device_model;
  store.device_class = device_class_of(device.kind());
  store.provenance = device.info().time_source == hw::TimeSource::modelled ? "modelled" : "measured";
  const bool cpu_clock = options.clock == ProfileClock::cpu_time &&
                         dynamic_cast<const hw::CpuDevice*>(&device) != nullptr &&
                         device.info().time_source == hw::TimeSource::measured;
  store.time_basis = cpu_clock ? "cpu_time" : (store.provenance == "modelled" ? "device" : "wall");
  store.host = host_name() + " / " + device.info().product + " (" + device.name() + ")";
  store.created = utc_now();
  const FeatureParams params = feature_params_for(device);

  std::vector<OpKind> kinds;
  for (OpKind k : options.kernels) {
    if (device.supports(k)) kinds.push_back(k);
  }
  // Fitting takes milliseconds; keep a small reserve anyway so the budget is a promise.
  const double reserve_s = std::min(2.0, 0.02 * options.budget_s);
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const double left = options.budget_s - reserve_s - since(t0);
    const double share = left / static_cast<double>(kinds.size() - i);  // unused time rolls over
    const auto samples = collect_samples(device, kinds[i], options, share, since(t0));
    const FeatureSet& fs = feature_set(kinds[i], store.device_class, device.info().backend);
    if (static_cast<int>(samples.size()) < fs.size() + 2) {
      throw Error("profiling " + std::string(kernels::to_string(kinds[i])) + " on " +
                  device.name() + ": only " + std::to_string(samples.size()) +
                  " points fit in the budget, need at least " + std::to_string(fs.size() + 2) +
                  " (raise --budget)");
    }
    const FitResult fit = fit_model(fs, params, samples, options.fit);
    store.models.insert_or_assign(kinds[i], KernelModel(fs, params, fit, samples));
  }
  return store;
}

TimingResult time_spmm(hw::Device& dev, const kernels::CsrI32& a, std::int64_t n,
                       const TimingPolicy& policy, ProfileClock clock) {
  OpShape shape;
  shape.kind = OpKind::spmm;
  shape.m = a.rows;
  shape.k = a.cols;
  shape.nnz = a.nnz();
  shape.degree_skew = kernels::degree_skew(a.indptr);
  PointBuffers bufs;
  add_graph(dev, bufs, shape, a);
  const auto launch = spmm_at_width(dev, bufs, shape, n);
  return time_repeated([&] { return timed_launch(dev, launch, clock); }, policy);
}

}  // namespace dype::perf
