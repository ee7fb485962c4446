// Run-time ISA detection and selection (kernels/cpu/isa.h).
#include "kernels/cpu/isa.h"

#include <gtest/gtest.h>

#include <cpuid.h>

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace dype::kernels::cpu {
namespace {

class IsaTest : public ::testing::Test {
 protected:
  void TearDown() override { force_isa(detected_isa()); }
};

TEST_F(IsaTest, NamesRoundTrip) {
  EXPECT_EQ(to_string(Isa::scalar), "scalar");
  EXPECT_EQ(to_string(Isa::avx2), "avx2");
  EXPECT_EQ(to_string(Isa::avx512), "avx512");
}

TEST_F(IsaTest, DetectionAgreesWithCompilerBuiltins) {
  // GCC's own cpu model (which also checks OS support) must agree with our cpuid/xgetbv probe.
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const Isa expected = avx512 && avx2 ? Isa::avx512 : (avx2 ? Isa::avx2 : Isa::scalar);
  EXPECT_EQ(detected_isa(), expected);
}

TEST_F(IsaTest, ForceLowersAndClamps) {
  force_isa(Isa::scalar);
  EXPECT_EQ(active_isa(), Isa::scalar);
  force_isa(Isa::avx512);  // never more than the CPU has
  EXPECT_EQ(active_isa(), detected_isa());
  if (detected_isa() >= Isa::avx2) {
    force_isa(Isa::avx2);
    EXPECT_EQ(active_isa(), Isa::avx2);
  }
}

}  // namespace
}  // namespace dype::kernels::cpu

namespace dype::kernels::cpu {
namespace {

TEST_F(IsaTest, EnvironmentOverride) {
  ASSERT_EQ(setenv("DYPE_ISA", "scalar", 1), 0);
  reload_isa_from_env();
  EXPECT_EQ(active_isa(), Isa::scalar);
  ASSERT_EQ(setenv("DYPE_ISA", "avx512", 1), 0);
  reload_isa_from_env();
  EXPECT_EQ(active_isa(), detected_isa());
  ASSERT_EQ(setenv("DYPE_ISA", "sse9", 1), 0);
  try {
    reload_isa_from_env();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "DYPE_ISA");
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos);
  }
  ASSERT_EQ(unsetenv("DYPE_ISA"), 0);
  reload_isa_from_env();
  EXPECT_EQ(active_isa(), detected_isa());
}

}  // namespace
}  // namespace dype::kernels::cpu
