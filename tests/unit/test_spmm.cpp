// CSR SpMM (kernels/cpu/spmm.h) against a double-precision reference, for every ISA variant this
// CPU runs, both index widths, thread counts 1..4, and adversarial shapes.
#include "kernels/cpu/spmm.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/spmm_kernels.h"
#include "common/csr.h"
#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

// Builds a CSR from per-row nnz counts with random columns and values.
template <typename Index>
Csr<Index> make_csr(std::int64_t rows, std::int64_t cols, const std::vector<std::int64_t>& row_nnz,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> col(0, std::max<std::int64_t>(cols - 1, 0));
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  Csr<Index> a;
  a.rows = rows;
  a.cols = cols;
  a.indptr.push_back(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < row_nnz[r]; ++k) {
      a.indices.push_back(static_cast<Index>(col(rng)));
      a.values.push_back(val(rng));
    }
    a.indptr.push_back(static_cast<Index>(a.indices.size()));
  }
  return a;
}

std::vector<float> random_dense(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& f : v) f = val(rng);
  return v;
}

// Checks spmm(a, x) against the reference within a bound scaled by sum |a_ij x_jc|. panel > 0
// forces that column-panel width (spmm() itself only uses panels when X outgrows the cache).
template <typename Index>
void expect_matches_reference(const Csr<Index>& a, std::int64_t n, const std::string& what,
                              std::int64_t panel = 0) {
  const std::vector<float> x = random_dense(a.cols * n, 7);
  std::vector<float> y(static_cast<std::size_t>(a.rows * n), std::nanf(""));  // must be overwritten
  if (panel > 0) {
    detail::spmm_panels(a.view(), std::span<const float>(x), n, std::span<float>(y), panel);
  } else {
    spmm(a.view(), x, n, y);
  }
  std::vector<double> ref(static_cast<std::size_t>(n)), mag(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    std::fill(ref.begin(), ref.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    for (Index j = a.indptr[r]; j < a.indptr[r + 1]; ++j) {
      for (std::int64_t c = 0; c < n; ++c) {
        const double term = static_cast<double>(a.values[j]) * x[a.indices[j] * n + c];
        ref[c] += term;
        mag[c] += std::abs(term);
      }
    }
    for (std::int64_t c = 0; c < n; ++c) {
      const float got = y[r * n + c];
      // Plain comparison first: a gtest assertion per element would dominate the test's run time.
      if (!(std::abs(got - ref[c]) <= 1e-5 * mag[c] + 1e-6)) {
        ASSERT_NEAR(got, ref[c], 1e-5 * mag[c] + 1e-6)
            << what << " isa=" << to_string(active_isa()) << " row " << r << " col " << c
            << " n=" << n << " panel=" << panel;
      }
    }
  }
}

struct Variant {
  Isa isa;
  int threads;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(detected_isa())) continue;
    for (int threads : {1, 2, 4}) out.push_back({isa, threads});
  }
  return out;
}

class SpmmTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    force_isa(GetParam().isa);
    control_ = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                     GetParam().threads);
  }
  void TearDown() override {
    control_.reset();
    force_isa(detected_isa());
  }
  std::unique_ptr<tbb::global_control> control_;
};

TEST_P(SpmmTest, ActiveIsaIsTheForcedOne) { EXPECT_EQ(active_isa(), GetParam().isa); }

TEST_P(SpmmTest, RandomUniformAllFeatureLengths) {
  const std::int64_t rows = 300, cols = 257;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> deg(0, 12);
  std::vector<std::int64_t> row_nnz(rows);
  for (auto& d : row_nnz) d = deg(rng);
  const auto a32 = make_csr<std::int32_t>(rows, cols, row_nnz, 2);
  const auto a64 = make_csr<std::int64_t>(rows, cols, row_nnz, 2);
  for (std::int64_t n : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 127, 128, 129, 200, 256, 300}) {
    expect_matches_reference(a32, n, "int32");
    expect_matches_reference(a64, n, "int64");
  }
}

TEST_P(SpmmTest, Int32AndInt64AgreeExactly) {
  std::vector<std::int64_t> row_nnz(1000);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<std::int64_t> deg(0, 40);
  for (auto& d : row_nnz) d = deg(rng);
  const auto a32 = make_csr<std::int32_t>(1000, 1000, row_nnz, 4);
  const auto a64 = make_csr<std::int64_t>(1000, 1000, row_nnz, 4);
  const std::int64_t n = 40;
  const auto x = random_dense(1000 * n, 5);
  std::vector<float> y32(1000 * n), y64(1000 * n);
  spmm(a32.view(), x, n, y32);
  spmm(a64.view(), x, n, y64);
  EXPECT_EQ(y32, y64);
}

TEST_P(SpmmTest, EmptyRowsAndZeroNnz) {
  // Alternating empty rows, leading and trailing runs of empty rows.
  std::vector<std::int64_t> row_nnz(500, 0);
  for (std::size_t r = 100; r < 400; r += 2) row_nnz[r] = 5;
  expect_matches_reference(make_csr<std::int32_t>(500, 60, row_nnz, 6), 19, "sparse rows");
  // No entries at all: Y must still be zeroed.
  std::vector<std::int64_t> none(5000, 0);
  expect_matches_reference(make_csr<std::int64_t>(5000, 10, none, 7), 33, "zero nnz");
}

TEST_P(SpmmTest, OneNode) {
  expect_matches_reference(make_csr<std::int32_t>(1, 1, {1}, 8), 1, "1x1 with self loop");
  expect_matches_reference(make_csr<std::int32_t>(1, 1, {3}, 8), 130, "1x1 duplicates");
  expect_matches_reference(make_csr<std::int64_t>(1, 1, {0}, 8), 16, "1x1 empty");
}

TEST_P(SpmmTest, HeavyRowIsSplitAndSummedCorrectly) {
  // Power-law worst case: one row holds ~95% of nnz, so it is cut across tasks.
  std::vector<std::int64_t> row_nnz(2000, 1);
  row_nnz[777] = 40000;
  row_nnz[1999] = 30000;  // heavy last row
  row_nnz[0] = 20000;     // heavy first row
  expect_matches_reference(make_csr<std::int32_t>(2000, 3000, row_nnz, 9), 64, "heavy rows");
  expect_matches_reference(make_csr<std::int64_t>(2000, 3000, row_nnz, 9), 21, "heavy rows");
}

TEST_P(SpmmTest, PowerLawDegrees) {
  std::vector<std::int64_t> row_nnz(4000);
  std::mt19937_64 rng(10);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto& d : row_nnz) {  // Pareto degrees, capped so the reference stays quick
    d = std::min<std::int64_t>(static_cast<std::int64_t>(std::pow(u(rng), -1.5)) - 1, 6000);
  }
  expect_matches_reference(make_csr<std::int32_t>(4000, 4000, row_nnz, 11), 128, "power law");
}

TEST_P(SpmmTest, ColumnPanelsOfAnyWidthCoverEveryColumn) {
  // Panels narrower than n, not multiples of the vector width, and with a ragged last panel; the
  // heavy row checks that the partial rows of a split row are summed per panel.
  std::vector<std::int64_t> row_nnz(600, 5);
  row_nnz[10] = 0;
  row_nnz[300] = 9000;
  const auto a32 = make_csr<std::int32_t>(600, 700, row_nnz, 14);
  const auto a64 = make_csr<std::int64_t>(600, 700, row_nnz, 14);
  for (std::int64_t n : {1, 17, 64, 130}) {
    for (std::int64_t panel : {1, 7, 16, 32, 48, 129, 1000}) {
      expect_matches_reference(a32, n, "panels int32", panel);
      expect_matches_reference(a64, n, "panels int64", panel);
    }
  }
}

TEST(SpmmPanelWidth, PanelsOnlyWhenXOutgrowsTheCacheAndAPanelFits) {
  constexpr std::int64_t kMiB = 1 << 20;
  // X of 100k x 128 floats = 51 MB against 16 MiB of cache: 32-column panels (12.8 MB).
  EXPECT_EQ(detail::spmm_panel_width(100000, 128, 16 * kMiB), 32);
  EXPECT_EQ(detail::spmm_panel_width(100000, 128, 24 * kMiB), 48);
  // X fits: one pass over A.
  EXPECT_EQ(detail::spmm_panel_width(100000, 128, 64 * kMiB), 128);
  EXPECT_EQ(detail::spmm_panel_width(1000, 512, 16 * kMiB), 512);
  // Not even the narrowest panel fits: panels would only re-read A.
  EXPECT_EQ(detail::spmm_panel_width(2400000, 100, 16 * kMiB), 100);
  // Narrow features are never cut.
  EXPECT_EQ(detail::spmm_panel_width(100000000, 32, 1 * kMiB), 32);
  EXPECT_EQ(detail::spmm_panel_width(0, 64, 0), 64);
  EXPECT_GT(detail::llc_bytes(), 0);
}

TEST_P(SpmmTest, DegenerateShapesAreNoOps) {
  Csr<std::int32_t> empty;
  empty.indptr = {0};
  std::vector<float> x, y;
  EXPECT_NO_THROW(spmm(empty.view(), x, 16, y));
  const auto a = make_csr<std::int32_t>(4, 4, {1, 1, 1, 1}, 12);
  EXPECT_NO_THROW(spmm(a.view(), x, 0, y));
}

TEST_P(SpmmTest, UndersizedSpansAreInputErrors) {
  const auto a = make_csr<std::int32_t>(10, 8, std::vector<std::int64_t>(10, 2), 13);
  std::vector<float> x(8 * 4), y(10 * 4);
  EXPECT_THROW(spmm(a.view(), std::span<const float>(x).first(31), 4, y), InputError);
  EXPECT_THROW(spmm(a.view(), x, 4, std::span<float>(y).first(39)), InputError);
  auto bad = a.view();
  bad.indptr = bad.indptr.first(10);
  EXPECT_THROW(spmm(bad, x, 4, y), InputError);
  auto short_values = a.view();
  short_values.values = short_values.values.first(3);
  try {
    spmm(short_values, x, 4, y);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(e.where().find("values"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, SpmmTest, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(to_string(info.param.isa)) + "_t" +
                                  std::to_string(info.param.threads);
                         });

}  // namespace
}  // namespace dype::kernels::cpu
