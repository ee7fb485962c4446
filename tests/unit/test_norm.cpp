// Row softmax and layer norm vs double-precision references, for every ISA variant this CPU runs:
// widths around the vector sizes, huge logits (stability), large row means (two-pass variance),
// empty shapes, input validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/norm.h"
#include "common/error.h"

namespace {

using dype::kernels::cpu::Isa;

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                                 float scale, float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = offset + scale * dist(rng);
  return x;
}

std::vector<double> softmax_reference(const std::vector<float>& x, std::int64_t rows,
                                      std::int64_t cols) {
  std::vector<double> y(x.begin(), x.end());
  for (std::int64_t r = 0; r < rows; ++r) {
    double* row = y.data() + r * cols;
    const double m = *std::max_element(row, row + cols);
    double sum = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sum += (row[c] = std::exp(row[c] - m));
    for (std::int64_t c = 0; c < cols; ++c) row[c] /= sum;
  }
  return y;
}

std::vector<double> layer_norm_reference(const std::vector<float>& x,
                                         const std::vector<float>& gamma,
                                         const std::vector<float>& beta, std::int64_t rows,
                                         std::int64_t cols, double eps) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    double mean = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) mean += row[c];
    mean /= static_cast<double>(cols);
    double var = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= static_cast<double>(cols);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (std::int64_t c = 0; c < cols; ++c) {
      y[r * cols + c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
    }
  }
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), atol + rtol * std::abs(want[i]))
        << what << ": element " << i << " got " << got[i] << " want " << want[i];
  }
}

class NormIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(dype::kernels::cpu::detected_isa())) {
      GTEST_SKIP() << "CPU lacks " << dype::kernels::cpu::to_string(GetParam());
    }
    dype::kernels::cpu::force_isa(GetParam());
  }
  void TearDown() override {
    dype::kernels::cpu::force_isa(dype::kernels::cpu::detected_isa());
  }
};

constexpr std::int64_t kWidths[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 512, 1000, 4099};

TEST_P(NormIsa, SoftmaxMatchesReference) {
  std::uint32_t seed = 1;
  for (std::int64_t cols : kWidths) {
    const std::int64_t rows = cols > 1000 ? 40 : 97;
    auto x = random_matrix(rows, cols, seed++, 3.0f);
    const auto want = softmax_reference(x, rows, cols);
    dype::kernels::cpu::softmax_rows(x, rows, cols);
    expect_close(x, want, 1e-7, 2e-6, "cols=" + std::to_string(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
      ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << r << " cols=" << cols;
    }
  }
}

TEST_P(NormIsa, SoftmaxIsStableForHugeLogits) {
  // exp(1e4) overflows FP32; subtracting the row max must keep every value finite.
  const std::int64_t rows = 8;
  const std::int64_t cols = 37;
  auto x = random_matrix(rows, cols, 5, 1e4f);
  x[3] = 3e38f;  // one extreme logit: that entry gets all the mass
  const auto want = softmax_reference(x, rows, cols);
  dype::kernels::cpu::softmax_rows(x, rows, cols);
  for (float v : x) ASSERT_TRUE(std::isfinite(v));
  expect_close(x, want, 1e-7, 1e-5, "huge logits");
  EXPECT_FLOAT_EQ(x[3], 1.0f);
}

TEST_P(NormIsa, SoftmaxOfEqualLogitsIsUniform) {
  std::vector<float> x(5 * 21, 42.0f);
  dype::kernels::cpu::softmax_rows(x, 5, 21);
  for (float v : x) EXPECT_FLOAT_EQ(v, 1.0f / 21.0f);
}

TEST_P(NormIsa, LayerNormMatchesReference) {
  std::uint32_t seed = 100;
  for (std::int64_t cols : kWidths) {
    const std::int64_t rows = 61;
    const auto x = random_matrix(rows, cols, seed++, 2.0f, 0.5f);
    const auto gamma = random_matrix(1, cols, seed++, 1.0f, 1.0f);
    const auto beta = random_matrix(1, cols, seed++, 0.5f);
    std::vector<float> y(x.size(), std::nanf(""));
    dype::kernels::cpu::layer_norm_rows(x, gamma, beta, y, rows, cols);
    expect_close(y, layer_norm_reference(x, gamma, beta, rows, cols, 1e-5), 2e-5, 2e-5,
                 "cols=" + std::to_string(cols));
  }
}

TEST_P(NormIsa, LayerNormLargeMeanSmallSpread) {
  // Mean 1e4, std 1: E[x^2] - mean^2 would lose every significant digit in FP32.
  const std::int64_t rows = 16;
  const std::int64_t cols = 768;
  const auto x = random_matrix(rows, cols, 9, 1.0f, 1e4f);
  const std::vector<float> gamma(cols, 1.0f);
  const std::vector<float> beta(cols, 0.0f);
  std::vector<float> y(x.size());
  dype::kernels::cpu::layer_norm_rows(x, gamma, beta, y, rows, cols);
  // x itself is only exact to ~1e-3 at 1e4, so the normalised values carry ~1e-3 error.
  expect_close(y, layer_norm_reference(x, gamma, beta, rows, cols, 1e-5), 3e-3, 1e-3, "offset");
}

TEST_P(NormIsa, LayerNormOfConstantRowIsBeta) {
  const std::int64_t cols = 19;
  const std::vector<float> x(3 * cols, 7.0f);
  const auto gamma = random_matrix(1, cols, 3, 1.0f);
  const auto beta = random_matrix(1, cols, 4, 1.0f);
  std::vector<float> y(x.size());
  dype::kernels::cpu::layer_norm_rows(x, gamma, beta, y, 3, cols);
  for (std::int64_t i = 0; i < 3 * cols; ++i) EXPECT_FLOAT_EQ(y[i], beta[i % cols]);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, NormIsa, ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const auto& info) {
                           return std::string(dype::kernels::cpu::to_string(info.param));
                         });

TEST(Norm, EmptyShapesAreNoOps) {
  std::vector<float> none;
  EXPECT_NO_THROW(dype::kernels::cpu::softmax_rows(none, 0, 10));
  EXPECT_NO_THROW(dype::kernels::cpu::softmax_rows(none, 10, 0));
  EXPECT_NO_THROW(dype::kernels::cpu::layer_norm_rows(none, none, none, none, 0, 0));
}

TEST(Norm, RejectsBadInput) {
  std::vector<float> x(12, 1.0f);
  std::vector<float> g(4, 1.0f);
  std::vector<float> y(12);
  using dype::kernels::cpu::layer_norm_rows;
  using dype::kernels::cpu::softmax_rows;
  EXPECT_THROW(softmax_rows(x, 4, 4), dype::InputError);
  EXPECT_THROW(softmax_rows(x, -1, 4), dype::InputError);
  EXPECT_THROW(layer_norm_rows(x, g, g, y, 4, 4), dype::InputError);
  EXPECT_THROW(layer_norm_rows(x, std::span<const float>(g).first(3), g, y, 3, 4),
               dype::InputError);
  EXPECT_THROW(layer_norm_rows(x, g, g, std::span<float>(y).first(11), 3, 4), dype::InputError);
  EXPECT_THROW(layer_norm_rows(x, g, g, y, 3, 4, -1.0f), dype::InputError);
  EXPECT_NO_THROW(layer_norm_rows(x, g, g, y, 3, 4));
}

}  // namespace
