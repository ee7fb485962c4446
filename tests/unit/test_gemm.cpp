// Dense GEMM with fused epilogues (kernels/cpu/gemm.h) against a double-precision reference.
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>
#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

std::vector<float> random_dense(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& f : v) f = val(rng);
  return v;
}

void expect_gemm_matches(const GemmDims& d, Epilogue epilogue) {
  const auto x = random_dense(d.m * d.k, 1);
  const auto w = random_dense(d.k * d.n, 2);
  const auto bias = random_dense(d.n, 3);
  const auto residual = random_dense(d.m * d.n, 4);
  std::vector<float> y(static_cast<std::size_t>(d.m * d.n), std::nanf(""));
  gemm(x, w, bias, y, d, epilogue, residual);
  const bool has_bias = dype::kernels::has_bias(epilogue), has_relu = dype::kernels::has_relu(epilogue);
  std::int64_t negatives_clamped = 0;
  for (std::int64_t r = 0; r < d.m; ++r) {
    for (std::int64_t c = 0; c < d.n; ++c) {
      double ref = has_bias ? bias[c] : 0.0, mag = std::abs(ref);
      for (std::int64_t i = 0; i < d.k; ++i) {
        const double t = static_cast<double>(x[r * d.k + i]) * w[i * d.n + c];
        ref += t;
        mag += std::abs(t);
      }
      if (has_relu && ref < 0) {
        ref = 0;
        ++negatives_clamped;
      }
      // GELU as PyTorch defines it (x Phi(x), exact erf); the residual after the activation.
      if (dype::kernels::has_gelu(epilogue)) ref = 0.5 * ref * (1.0 + std::erf(ref / std::sqrt(2.0)));
      if (dype::kernels::has_residual(epilogue)) {
        ref += residual[r * d.n + c];
        mag += std::abs(residual[r * d.n + c]);
      }
      const float got = y[r * d.n + c];
      if (!(std::abs(got - ref) <= 1e-5 * mag + 1e-6)) {
        ASSERT_NEAR(got, ref, 1e-5 * mag + 1e-6) << "m=" << d.m << " k=" << d.k << " n=" << d.n
                                                 << " epilogue=" << static_cast<int>(epilogue)
                                                 << " at " << r << "," << c;
      }
    }
  }
  // Random signs: the ReLU must actually have had negatives to clamp on non-trivial shapes.
  if (has_relu && d.m * d.n >= 64 && d.k > 0) {
    EXPECT_GT(negatives_clamped, 0);
  }
}

class GemmTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    control_ = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                     GetParam());
  }
  std::unique_ptr<tbb::global_control> control_;
};

TEST_P(GemmTest, ShapesAndEpilogues) {
  const GemmDims shapes[] = {{1, 1, 1},    {1, 7, 1},     {3, 5, 2},      {17, 33, 9},
                             {64, 128, 128}, {513, 64, 17}, {1037, 128, 128}, {2048, 3, 300},
                             {700, 257, 1}};
  for (const GemmDims& d : shapes) {
    for (Epilogue e : {Epilogue::none, Epilogue::bias, Epilogue::relu, Epilogue::bias_relu, Epilogue::bias_gelu,
                       Epilogue::bias_residual}) {
      expect_gemm_matches(d, e);
    }
  }
}

TEST_P(GemmTest, EmptyInnerDimensionGivesEpilogueOfZero) {
  for (Epilogue e : {Epilogue::none, Epilogue::bias, Epilogue::relu, Epilogue::bias_relu, Epilogue::bias_gelu,
                     Epilogue::bias_residual}) {
    expect_gemm_matches({5, 0, 4}, e);
  }
  std::vector<float> none, w(16, 1.0f);
  EXPECT_NO_THROW(gemm(none, w, none, none, {0, 4, 4}));  // no rows: nothing to write
}

TEST_P(GemmTest, RepeatedAndConcurrentCallsAgree) {
  // The primitive cache and per-thread scratchpads must give the same answer every time.
  const GemmDims d{1500, 96, 80};
  const auto x = random_dense(d.m * d.k, 4), w = random_dense(d.k * d.n, 5), b = random_dense(d.n, 6);
  std::vector<float> first(d.m * d.n), again(d.m * d.n);
  gemm(x, w, b, first, d, Epilogue::bias_relu);
  for (int i = 0; i < 3; ++i) {
    gemm(x, w, b, again, d, Epilogue::bias_relu);
    ASSERT_EQ(first, again);
  }
}

TEST_P(GemmTest, UndersizedSpansAreInputErrors) {
  const GemmDims d{4, 3, 2};
  std::vector<float> x(12), w(6), b(2), y(8);
  EXPECT_THROW(gemm(std::span<const float>(x).first(11), w, b, y, d), InputError);
  EXPECT_THROW(gemm(x, std::span<const float>(w).first(5), b, y, d), InputError);
  EXPECT_THROW(gemm(x, w, b, std::span<float>(y).first(7), d), InputError);
  EXPECT_NO_THROW(gemm(x, w, {}, y, d, Epilogue::relu));  // bias unused
  try {
    gemm(x, w, std::span<const float>(b).first(1), y, d, Epilogue::bias);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "gemm: bias");
  }
  try {
    const std::vector<float> r(7);
    gemm(x, w, b, y, d, Epilogue::bias_residual, r);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "gemm: residual");
  }
  EXPECT_THROW(gemm(x, w, b, y, {-1, 3, 2}), InputError);
}

INSTANTIATE_TEST_SUITE_P(Threads, GemmTest, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "t" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace dype::kernels::cpu
