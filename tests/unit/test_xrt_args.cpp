// FPGA launcher argument packing (kernels/xrt/xrt_args.h): pure, runs on every machine.
#include <gtest/gtest.h>

#include "common/error.h"
#include "kernels/xrt/xrt_args.h"

namespace kx = dype::kernels::xrt;
using dype::kernels::OpKind;

namespace {
kx::KernelSignature sextans() {
  kx::KernelSignature s;
  s.kernel = "sextans";
  s.args = {{"A_ptr", kx::Source::indptr}, {"A_idx", kx::Source::indices}, {"A_val", kx::Source::values},
            {"B", kx::Source::x},          {"C", kx::Source::y},             {"M", kx::Source::m, kx::ScalarType::u32},
            {"K", kx::Source::k_dim, kx::ScalarType::u32}, {"N", kx::Source::n, kx::ScalarType::u32},
            {"NNZ", kx::Source::nnz, kx::ScalarType::u64},
            {"alpha", kx::Source::constant, kx::ScalarType::f32, 1.5}};
  return s;
}
dype::kernels::OpShape spmm_shape() {
  dype::kernels::OpShape s;
  s.kind = OpKind::spmm;
  s.m = 100;
  s.k = 80;
  s.n = 16;
  s.nnz = 1234;
  return s;
}
}  // namespace

TEST(XrtArgs, PacksBuffersInLaunchOrderAndScalarsByDeclaredType) {
  const auto args = kx::pack_args(sextans(), spmm_shape(), "fpga0");
  ASSERT_EQ(args.size(), 10u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(args[i].index, i);
    EXPECT_EQ(args[i].buffer, i);  // indptr, indices, values, x, then y (the output) last
  }
  EXPECT_EQ(std::get<std::uint32_t>(args[5].scalar), 100u);
  EXPECT_EQ(std::get<std::uint32_t>(args[6].scalar), 80u);
  EXPECT_EQ(std::get<std::uint32_t>(args[7].scalar), 16u);
  EXPECT_EQ(std::get<std::uint64_t>(args[8].scalar), 1234u);
  EXPECT_FLOAT_EQ(std::get<float>(args[9].scalar), 1.5f);
}

TEST(XrtArgs, LayoutComesFromTheSignatureNotTheOp) {
  auto sig = sextans();
  std::swap(sig.args[0], sig.args[4]);  // a design that takes C first
  const auto args = kx::pack_args(sig, spmm_shape(), "fpga0");
  EXPECT_EQ(args[0].buffer, 4);
  EXPECT_EQ(args[4].buffer, 0);
}

TEST(XrtArgs, RejectsValuesThatDoNotFit) {
  auto shape = spmm_shape();
  shape.m = 5'000'000'000LL;  // > u32
  try {
    kx::pack_args(sextans(), shape, "fpga0");
    FAIL() << "expected InputError";
  } catch (const dype::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'M'"), std::string::npos) << e.what();
  }
}

TEST(XrtArgs, ValidatesBindings) {
  auto missing = sextans();
  missing.args.erase(missing.args.begin() + 4);  // no output
  EXPECT_THROW(kx::validate_signature(missing, OpKind::spmm, "m"), dype::InputError);
  auto twice = sextans();
  twice.args.push_back({"B2", kx::Source::x});
  EXPECT_THROW(kx::validate_signature(twice, OpKind::spmm, "m"), dype::InputError);
  auto foreign = sextans();
  foreign.args.push_back({"L", kx::Source::seq_len, kx::ScalarType::u32});
  EXPECT_THROW(kx::validate_signature(foreign, OpKind::spmm, "m"), dype::InputError);
  EXPECT_THROW(kx::validate_signature(sextans(), OpKind::gemm, "m"), dype::InputError);

  kx::KernelSignature swat{"swat", {{"Q", kx::Source::q}, {"K", kx::Source::k}, {"V", kx::Source::v},
                                    {"O", kx::Source::out}, {"L", kx::Source::seq_len, kx::ScalarType::u32},
                                    {"W", kx::Source::window, kx::ScalarType::u32}}};
  EXPECT_NO_THROW(kx::validate_signature(swat, OpKind::window_attention, "m"));
}

TEST(XrtArgs, SourceNames) {
  EXPECT_EQ(kx::source_from_string("indptr"), kx::Source::indptr);
  EXPECT_EQ(kx::source_from_string("const"), kx::Source::constant);
  EXPECT_FALSE(kx::source_from_string("bogus"));
  EXPECT_EQ(kx::to_string(kx::Source::k_dim), "k_dim");
  EXPECT_TRUE(kx::is_buffer(kx::Source::out));
  EXPECT_FALSE(kx::is_buffer(kx::Source::m));
}
