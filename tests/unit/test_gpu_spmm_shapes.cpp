// The SpMM shapes `dype-profile run` times on a GPU (the first points of the profiler's synthetic
// sweep: uniform, power-law and community-structured graphs up to ~25M nnz), each run once on the
// vendor's first GPU and compared with dype's CPU kernel. A shape the vendor library cannot run
// must fail here, named, rather than abort a profiling run halfway (it did: an illegal address on
// an H100). Without the vendor's build, driver or GPU the cases skip and say why.
//
// DYPE_SPMM_SHAPES=FIRST-LAST (1-based, inclusive) runs only those points: for a run under
// compute-sanitizer, which is slow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../test_device_data.h"
#include "hw/registry.h"
#include "hw/system_config.h"
#include "kernels/cpu/spmm.h"
#include "perfmodel/profiler.h"
#include "perfmodel/synthetic.h"

namespace {

namespace hw = dype::hw;
namespace perf = dype::perf;
namespace k = dype::kernels;

constexpr int kPoints = 48;
constexpr int kRepeats = 31;

std::pair<int, int> point_range() {
  int first = 1, last = kPoints;
  if (const char* env = std::getenv("DYPE_SPMM_SHAPES")) {
    if (std::sscanf(env, "%d-%d", &first, &last) != 2) first = last = std::atoi(env);
  }
  return {std::max(first, 1), std::min(last, kPoints)};
}

std::int64_t longest_row(const std::vector<std::int32_t>& indptr) {
  std::int64_t m = 0;
  for (std::size_t r = 1; r < indptr.size(); ++r) m = std::max<std::int64_t>(m, indptr[r] - indptr[r - 1]);
  return m;
}

class GpuSpmmShapes : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuSpmmShapes, ProfilerSweepMatchesCpu) {
  const hw::Backend* backend = hw::find_backend(GetParam());
  if (backend == nullptr || !backend->detect) GTEST_SKIP() << GetParam() << " backend not built";
  const auto found = backend->detect();
  if (found.empty()) GTEST_SKIP() << "no " << GetParam() << " device on this machine";
  hw::SystemConfig sys;
  auto gpu = backend->create(found.front(), sys);

  auto ranges = perf::default_ranges(perf::DeviceClass::gpu, k::OpKind::spmm, /*modelled=*/false);
  ranges.max_device_bytes = 0.8 * static_cast<double>(gpu->info().memory_bytes);
  const auto specs = perf::generate_specs(k::OpKind::spmm, ranges, kPoints, /*seed=*/1);
  const auto [first, last] = point_range();
  ASSERT_LE(first, last) << "DYPE_SPMM_SHAPES must be FIRST-LAST within 1-" << kPoints;
  for (int i = first; i <= last; ++i) {
    const perf::InputSpec& spec = specs[static_cast<std::size_t>(i - 1)];
    const auto a = perf::materialise_csr(spec);
    const std::int64_t n = spec.shape.n;
    char what[200];
    std::snprintf(what, sizeof what, "point %d: m=%lld n=%lld nnz=%lld max row %lld (%s, local %.2f)", i,
                  static_cast<long long>(a.rows), static_cast<long long>(n), static_cast<long long>(a.nnz()),
                  static_cast<long long>(longest_row(a.indptr)),
                  spec.degrees == perf::DegreeDistribution::power_law ? "power law" : "uniform", spec.local_share);
    SCOPED_TRACE(what);
    std::printf("%s\n", what);
    std::fflush(stdout);
    const auto x = hw::testing::random_floats(static_cast<std::size_t>(a.cols * n), static_cast<unsigned>(i));
    std::vector<float> ref(static_cast<std::size_t>(a.rows * n)), scale(ref.size());
    k::cpu::spmm(a.view(), x, n, ref);
    // FP32 sums of a hub row's 100k+ terms differ by summation order: each output is held to a
    // bound relative to the sum of its terms' magnitudes (|A| |X|), not to its own value.
    auto abs_a = a;
    for (float& v : abs_a.values) v = std::fabs(v);
    std::vector<float> abs_x(x.size());
    std::transform(x.begin(), x.end(), abs_x.begin(), [](float v) { return std::fabs(v); });
    k::cpu::spmm(abs_a.view(), abs_x, n, scale);

    auto bp = hw::testing::upload(*gpu, a.indptr), bi = hw::testing::upload(*gpu, a.indices);
    auto bv = hw::testing::upload(*gpu, a.values), bx = hw::testing::upload(*gpu, x);
    auto by = gpu->allocate(ref.size() * sizeof(float));
    // As often as the profiler times a point: the plan is built once and reused.
    for (int rep = 0; rep < kRepeats; ++rep) {
      ASSERT_NO_THROW(gpu->launch(hw::KernelLaunch::spmm(*bp, *bi, *bv, *bx, *by, a.rows, a.cols, n, a.nnz())))
          << "launch " << rep + 1;
    }
    const auto y = hw::testing::download(*gpu, *by);
    std::size_t bad = 0;
    double worst = 0.0;
    for (std::size_t j = 0; j < y.size(); ++j) {
      const double err = std::fabs(static_cast<double>(y[j]) - ref[j]) / (1e-6 + scale[j]);
      worst = std::max(worst, err);
      bad += !(err <= 1e-5);
    }
    ASSERT_EQ(bad, 0u) << "of " << y.size() << " outputs differ from the CPU kernel by more than 1e-5 of |A||X| (worst "
                       << worst << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Vendors, GpuSpmmShapes, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
