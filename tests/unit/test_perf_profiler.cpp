// The profiler's sampling on a measured device (this machine's CPU): each synthetic SpMM graph is
// timed at several feature lengths, all inside the caps, and the point budget holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include <tbb/task_arena.h>

#include "hw/system.h"
#include "hw/system_config.h"
#include "perfmodel/profiler.h"
#include "perfmodel/synthetic.h"

namespace dype::perf {
namespace {

using kernels::OpKind;

SyntheticRanges small_graphs() {
  SyntheticRanges r;
  r.rows_min = 1000;
  r.rows_max = 4000;
  r.density_min = 1e-3;
  r.density_max = 4e-3;
  r.feature_min = 16;
  r.feature_max = 256;
  r.max_work = 2e7;
  r.max_bytes = 64.0 * 1024 * 1024;
  return r;
}

TEST(PerfSynthetic, OtherFeatureLengthsAreNewAndWithinTheCaps) {
  const SyntheticRanges r = small_graphs();
  const auto specs = generate_specs(OpKind::spmm, r, 50, 3);
  int total = 0;
  for (const InputSpec& spec : specs) {
    const auto widths = other_feature_lengths(spec, spec.shape.nnz, r, 4);
    EXPECT_EQ(widths, other_feature_lengths(spec, spec.shape.nnz, r, 4)) << "deterministic in the spec";
    EXPECT_LE(widths.size(), 4u);
    std::set<std::int64_t> seen{spec.shape.n};
    for (std::int64_t n : widths) {
      EXPECT_TRUE(seen.insert(n).second) << "feature length " << n << " repeated";
      EXPECT_GE(n, 16);
      EXPECT_LE(n, 256);
      OpShape s = spec.shape;
      s.n = n;
      EXPECT_LE(work_of(s), r.max_work);
      EXPECT_LE(bytes_of(s), r.max_bytes);
    }
    total += static_cast<int>(widths.size());
  }
  EXPECT_GT(total, 100) << "the caps leave room for most graphs";
  // A graph at the work cap leaves no room for a wider N: none is offered rather than one over it.
  const auto wide = std::max_element(specs.begin(), specs.end(),
                                     [](const auto& a, const auto& b) { return a.shape.n < b.shape.n; });
  ASSERT_GT(wide->shape.n, 32) << "a spec with room for narrower widths";
  SyntheticRanges tight = r;
  tight.max_work = work_of(wide->shape);
  const auto narrower = other_feature_lengths(*wide, wide->shape.nnz, tight, 4);
  EXPECT_FALSE(narrower.empty());
  for (std::int64_t n : narrower) EXPECT_LT(n, wide->shape.n);
}

// GPU SpMM profiles time half their widths at multiples of 8 (what GNN layers run, and what a GPU
// moves in float4s); other ranges draw the widths they always did.
TEST(PerfSynthetic, AlignedWidthShareRoundsFeatureLengths) {
  SyntheticRanges r = small_graphs();
  const auto plain = generate_specs(OpKind::spmm, r, 200, 7);
  r.aligned_feature_share = 0.5;
  const auto specs = generate_specs(OpKind::spmm, r, 200, 7);
  EXPECT_EQ(generate_specs(OpKind::spmm, r, 200, 7)[17].shape.n, specs[17].shape.n);  // deterministic
  int aligned = 0, plain_aligned = 0, others = 0, others_aligned = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    aligned += specs[i].shape.n % 8 == 0;
    plain_aligned += plain[i].shape.n % 8 == 0;
    for (std::int64_t n : other_feature_lengths(specs[i], specs[i].shape.nnz, r, 2)) {
      ++others;
      others_aligned += n % 8 == 0;
    }
  }
  EXPECT_GT(aligned, 80);   // ~50% + 1/8 of the rest
  EXPECT_LT(aligned, 150);
  EXPECT_LT(plain_aligned, 50);  // ~1/8
  EXPECT_GT(others_aligned, others / 3);
  EXPECT_EQ(default_ranges(DeviceClass::gpu, OpKind::spmm, false).aligned_feature_share, 0.5);
  EXPECT_EQ(default_ranges(DeviceClass::cpu, OpKind::spmm, false).aligned_feature_share, 0.0);
}

// Rows are built in parallel, each from its own random stream: one thread or many, the same graph.
TEST(PerfSynthetic, MaterialisedGraphDoesNotDependOnTheThreadCount) {
  SyntheticRanges r = small_graphs();
  r.rows_max = 60000;
  r.community_share = 1.0;  // community draws use the row's position
  for (const InputSpec& spec : generate_specs(OpKind::spmm, r, 6, 5)) {
    const auto many = materialise_csr(spec);
    kernels::CsrI32 one;
    tbb::task_arena(1).execute([&] { one = materialise_csr(spec); });
    EXPECT_EQ(one.indptr, many.indptr);
    EXPECT_EQ(one.indices, many.indices);
    EXPECT_EQ(one.values, many.values);
  }
}

// (m, nnz) of each sample: one graph per pair in these small random graphs.
std::vector<std::pair<std::int64_t, std::int64_t>> graphs_of(const KernelModel& m) {
  std::vector<std::pair<std::int64_t, std::int64_t>> g;
  for (const auto& s : m.samples) g.emplace_back(s.shape.m, s.shape.nnz);
  return g;
}

TEST(PerfProfiler, EachSpmmGraphIsTimedAtSeveralFeatureLengths) {
  hw::System sys = hw::System::from_config(hw::load_system_config(DYPE_SOURCE_DIR "/configs/systems/local.yaml"));
  ProfileOptions o;
  o.kernels = {OpKind::spmm};
  o.max_points = 30;
  o.budget_s = 60;
  o.clock = ProfileClock::wall;
  o.ranges = [](DeviceClass, OpKind, bool) { return small_graphs(); };
  o.spmm_widths_per_graph = 3;
  const ModelStore three = profile_device(sys.device("cpu0"), "test-cpu", o);
  const KernelModel& m3 = three.models.at(OpKind::spmm);
  ASSERT_EQ(m3.samples.size(), 30u) << "the point budget counts every feature length";
  const auto g3 = graphs_of(m3);
  // Samples of one graph come together, at distinct feature lengths.
  std::size_t graphs = 0;
  for (std::size_t i = 0; i < g3.size();) {
    std::size_t j = i;
    std::set<std::int64_t> widths;
    while (j < g3.size() && g3[j] == g3[i]) widths.insert(m3.samples[j++].shape.n);
    EXPECT_EQ(widths.size(), j - i) << "graph " << graphs << " timed twice at one feature length";
    EXPECT_LE(j - i, 3u);
    ++graphs;
    i = j;
  }
  EXPECT_LE(graphs, 15u) << "most graphs give more than one point";
  // The fit holds out whole graphs: a held-out point whose graph it saw at another width would
  // flatter the held-out error.
  for (std::size_t i = 0; i < g3.size(); ++i)
    for (std::size_t j = i + 1; j < g3.size() && g3[j] == g3[i]; ++j)
      EXPECT_EQ(m3.samples[i].holdout, m3.samples[j].holdout) << "samples " << i << " and " << j;
  EXPECT_GT(m3.stats.holdout, 0);

  o.spmm_widths_per_graph = 1;
  const ModelStore one = profile_device(sys.device("cpu0"), "test-cpu", o);
  const auto g1 = graphs_of(one.models.at(OpKind::spmm));
  EXPECT_EQ(std::set(g1.begin(), g1.end()).size(), g1.size()) << "one point per graph";
}

}  // namespace
}  // namespace dype::perf
