// The operator state file: round trip, atomic replacement, and a damaged file refused naming the
// file and key (dype-serve then exits 1 saying which, rather than start in a state nobody chose).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../test_temp_dir.h"
#include "common/error.h"
#include "runtime/daemon/admin/operator_state.h"

namespace dype::rt::daemon {
namespace {

namespace fs = std::filesystem;

TEST(OperatorState, RoundTripsAndReplacesAtomically) {
  const fs::path dir = test::process_temp_dir("dype-opstate") / "a";
  OperatorStateFile f(dir.string());  // creates the folder
  EXPECT_FALSE(f.load().mode.has_value());
  OperatorState s;
  s.mode = "energy";
  s.drained = {"gpu1", "gpu0"};
  s.bitstreams = {{"fpga0", "/x/u280-sextans-gemm.yaml"}, {"fpga1", ""}};
  f.save(s);
  s.drained.erase("gpu0");
  f.save(s);
  const OperatorState back = f.load();
  EXPECT_EQ(back.mode, "energy");
  EXPECT_EQ(back.drained, (std::set<std::string>{"gpu1"}));
  EXPECT_EQ(back.bitstreams, s.bitstreams);
  EXPECT_FALSE(fs::exists(f.path() + ".tmp"));
}

TEST(OperatorState, DamagedFilesAreRefusedNamingTheProblem) {
  const fs::path dir = test::process_temp_dir("dype-opstate") / "b";
  OperatorStateFile f(dir.string());
  auto refusal = [&](const std::string& text) {
    std::ofstream(f.path()) << text;
    try {
      f.load();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(refusal("{\"mode\": ").find("state.json: not valid JSON"), std::string::npos);
  EXPECT_NE(refusal("[]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(refusal(R"({"drained": "gpu0"})").find("drained: must be a list of device names"), std::string::npos);
  EXPECT_NE(refusal(R"({"bitstreams": {"fpga0": 3}})").find("bitstreams.fpga0: must be a manifest path"), std::string::npos);
  EXPECT_NE(refusal(R"({"colour": "red"})").find("colour: unknown key"), std::string::npos);
  EXPECT_THROW(OperatorStateFile("/proc/no-such-dir/state"), InputError);
}

}  // namespace
}  // namespace dype::rt::daemon
