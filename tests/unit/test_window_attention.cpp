// Sliding-window attention vs a double-precision reference, for every ISA variant this CPU runs,
// on random inputs and the edge cases (window 0, window >= seq_len, full attention, seq_len 1,
// head_dim 1 and not a multiple of the vector width, one head), plus input validation, thread
// determinism and the linear-memory property of the scratch.
#include <gtest/gtest.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/window_attention.h"
#include "common/error.h"

namespace {

using dype::kernels::cpu::Isa;
using dype::kernels::cpu::WindowAttentionDims;

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const WindowAttentionDims& d, std::uint32_t seed, float q_scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const auto n = static_cast<std::size_t>(d.seq_len * d.heads * d.head_dim);
  Inputs in{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  for (auto& x : in.q) x = dist(rng) * q_scale;
  for (auto& x : in.k) x = dist(rng);
  for (auto& x : in.v) x = dist(rng);
  return in;
}

// Straightforward reference: per head and query row, scores over the band in double, softmax,
// weighted sum of V. half is the one-sided reach (window / 2).
std::vector<double> reference(const Inputs& in, const WindowAttentionDims& d, std::int64_t half) {
  const std::int64_t ld = d.heads * d.head_dim;
  std::vector<double> out(static_cast<std::size_t>(d.seq_len * ld), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
  std::vector<double> s;
  for (std::int64_t h = 0; h < d.heads; ++h) {
    const std::int64_t c0 = h * d.head_dim;
    for (std::int64_t i = 0; i < d.seq_len; ++i) {
      const std::int64_t lo = std::max<std::int64_t>(0, i - half);
      const std::int64_t hi = std::min<std::int64_t>(d.seq_len - 1, i + half);
      s.assign(static_cast<std::size_t>(hi - lo + 1), 0.0);
      double m = -INFINITY;
      for (std::int64_t j = lo; j <= hi; ++j) {
        double acc = 0.0;
        for (std::int64_t t = 0; t < d.head_dim; ++t) {
          acc += static_cast<double>(in.q[i * ld + c0 + t]) * in.k[j * ld + c0 + t];
        }
        s[j - lo] = acc * scale;
        m = std::max(m, s[j - lo]);
      }
      double sum = 0.0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (std::int64_t j = lo; j <= hi; ++j) {
        const double p = s[j - lo] / sum;
        for (std::int64_t t = 0; t < d.head_dim; ++t) out[i * ld + c0 + t] += p * in.v[j * ld + c0 + t];
      }
    }
  }
  return out;
}

std::vector<float> run(const Inputs& in, const WindowAttentionDims& d) {
  std::vector<float> out(in.q.size(), std::nanf(""));
  dype::kernels::cpu::window_attention(in.q, in.k, in.v, out, d);
  return out;
}

// |got - want| <= atol + rtol |want|; the defaults fit FP32 accumulation over a few hundred terms.
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what, double atol = 1e-5, double rtol = 1e-4) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0.0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]) / (atol + rtol * std::abs(want[i]));
    if (!(err <= worst)) {  // also catches NaN
      worst = std::isnan(err) ? INFINITY : err;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, 1.0) << what << ": element " << worst_at << " got " << got[worst_at]
                        << " want " << want[worst_at];
}

std::string name(const WindowAttentionDims& d) {
  return "seq_len=" + std::to_string(d.seq_len) + " heads=" + std::to_string(d.heads) +
         " head_dim=" + std::to_string(d.head_dim) + " window=" + std::to_string(d.window);
}

class WindowAttentionIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(dype::kernels::cpu::detected_isa())) {
      GTEST_SKIP() << "CPU lacks " << dype::kernels::cpu::to_string(GetParam());
    }
    dype::kernels::cpu::force_isa(GetParam());
    ASSERT_EQ(dype::kernels::cpu::active_isa(), GetParam());
  }
  void TearDown() override {
    dype::kernels::cpu::force_isa(dype::kernels::cpu::detected_isa());
  }

  void check(const WindowAttentionDims& d, std::uint32_t seed, float q_scale = 1.0f) {
    const Inputs in = random_inputs(d, seed, q_scale);
    // Scores carry FP32 rounding proportional to their magnitude (~q_scale), and softmax turns
    // that absolute logit error into a relative error of the weights.
    expect_close(run(in, d), reference(in, d, d.window / 2), name(d), 1e-5 * q_scale,
                 1e-4 * q_scale);
  }
};

TEST_P(WindowAttentionIsa, RandomShapesMatchReference) {
  const WindowAttentionDims cases[] = {
      {257, 3, 64, 64},    // several blocks, partial last micro-tile
      {1000, 2, 37, 100},  // head_dim not a multiple of any vector width
      {600, 8, 64, 512},   // the benchmark's head shape, band wider than a block
      {333, 1, 16, 33},    // odd window: half = 16
      {129, 4, 80, 20},    // head_dim = 5 AVX-512 vectors (PV chunk + remainder)
      {70, 2, 128, 1000},  // window far beyond seq_len
  };
  std::uint32_t seed = 1;
  for (const auto& d : cases) check(d, seed++);
}

TEST_P(WindowAttentionIsa, WindowZeroAttendsToSelfOnly) {
  for (std::int64_t window : {0, 1}) {  // window 1: half = 0, the same band
    const WindowAttentionDims d{50, 2, 24, window};
    const Inputs in = random_inputs(d, 7);
    const auto out = run(in, d);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], in.v[i], 1e-6f) << i;
  }
}

TEST_P(WindowAttentionIsa, WindowAtLeastSeqLen) {
  // window == seq_len still clips the band at half = seq_len / 2 ...
  check({64, 2, 32, 64}, 11);
  // ... and window >= 2 (seq_len - 1) is full attention: compare with an unmasked reference.
  const WindowAttentionDims d{97, 3, 20, 4 * 97};
  const Inputs in = random_inputs(d, 12);
  expect_close(run(in, d), reference(in, d, d.seq_len), "full attention");
}

TEST_P(WindowAttentionIsa, SeqLenOneReturnsV) {
  const WindowAttentionDims d{1, 4, 9, 512};
  const Inputs in = random_inputs(d, 13);
  const auto out = run(in, d);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], in.v[i], 1e-6f);
}

TEST_P(WindowAttentionIsa, TinyAndOddHeadDims) {
  std::uint32_t seed = 20;
  for (std::int64_t dim : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65}) {
    check({45, 2, dim, 12}, seed++);
  }
}

TEST_P(WindowAttentionIsa, OneHead) { check({300, 1, 64, 128}, 30); }

TEST_P(WindowAttentionIsa, LargeScoresStayStable) {
  // Scores of order 1e2..1e3: a softmax without the max shift would overflow to inf/NaN.
  check({200, 2, 32, 40}, 31, 60.0f);
}

TEST_P(WindowAttentionIsa, SameResultOnOneAndTwoThreads) {
  const WindowAttentionDims d{1024, 4, 64, 256};
  const Inputs in = random_inputs(d, 40);
  std::vector<float> one;
  tbb::task_arena arena1(1);
  arena1.execute([&] { one = run(in, d); });
  std::vector<float> two;
  tbb::task_arena arena2(2);
  arena2.execute([&] { two = run(in, d); });
  // Every output row is produced by one task in a fixed order: bitwise equal.
  EXPECT_EQ(one, two);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, WindowAttentionIsa,
                         ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const auto& info) {
                           return std::string(dype::kernels::cpu::to_string(info.param));
                         });

TEST(WindowAttention, EmptySequenceIsANoOp) {
  std::vector<float> none;
  EXPECT_NO_THROW(dype::kernels::cpu::window_attention(none, none, none, none, {0, 2, 8, 4}));
}

TEST(WindowAttention, RejectsBadInput) {
  std::vector<float> buf(4 * 2 * 8, 0.0f);
  std::vector<float> small(10, 0.0f);
  std::vector<float> out(buf.size());
  using dype::kernels::cpu::window_attention;
  EXPECT_THROW(window_attention(small, buf, buf, out, {4, 2, 8, 2}), dype::InputError);
  EXPECT_THROW(window_attention(buf, small, buf, out, {4, 2, 8, 2}), dype::InputError);
  EXPECT_THROW(window_attention(buf, buf, small, out, {4, 2, 8, 2}), dype::InputError);
  EXPECT_THROW(window_attention(buf, buf, buf, small, {4, 2, 8, 2}), dype::InputError);
  EXPECT_THROW(window_attention(buf, buf, buf, out, {4, 0, 8, 2}), dype::InputError);
  EXPECT_THROW(window_attention(buf, buf, buf, out, {4, 2, 0, 2}), dype::InputError);
  EXPECT_THROW(window_attention(buf, buf, buf, out, {4, 2, 8, -1}), dype::InputError);
  EXPECT_THROW(window_attention(buf, buf, buf, out, {-1, 2, 8, 2}), dype::InputError);
  try {
    window_attention(small, buf, buf, out, {4, 2, 8, 2});
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("q"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
}

TEST(WindowAttention, ScratchDoesNotGrowWithSeqLen) {
  using dype::kernels::cpu::window_attention_scratch_bytes;
  const auto at = [](std::int64_t seq_len) {
    return window_attention_scratch_bytes({seq_len, 8, 64, 512});
  };
  // Scratch is the packed band (block + window keys) x head_dim plus one score tile.
  // (Short sequences on many threads use smaller blocks, hence <= rather than ==.)
  EXPECT_GT(at(4096), 0);
  EXPECT_LE(at(4096), at(16384));
  EXPECT_EQ(at(16384), at(1 << 20));
  EXPECT_LT(at(16384), 1 << 20);
}

}  // namespace
