// What each device is planned with, end to end as an operator sees it: `dype-profile run --out DIR`
// names its store by the device's profile id, `dype-serve --perfmodels DIR` finds it under that id
// with no renaming, and the daemon says so at start and in GET /v2/dype/admin/devices (each
// device's `planning`, the system's `transfers`). Bare dype-serve on this GPU-less machine plans
// the detected CPU and says why its transfers are serial.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../test_run_cli.h"
#include "../test_serve_process.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dype::test::read_all;
using dype::test::spawn_serve;

const std::string kSrc = DYPE_SOURCE_DIR;
const std::string kProfile = std::string(DYPE_BINARY_DIR) + "/apps/dype-profile";

nlohmann::json device(const nlohmann::json& devices, const std::string& name) {
  for (const auto& d : devices["devices"])
    if (d["name"] == name) return d;
  return {};
}

// GET /v2/dype/admin/devices from the daemon that wrote `ports` (admin token "s3cret"); null, with
// a failure recorded, when it did not start or did not answer.
nlohmann::json admin_devices(const fs::path& ports, const fs::path& log) {
  if (!fs::exists(ports)) {
    ADD_FAILURE() << "dype-serve did not start: " << read_all(log);
    return nullptr;
  }
  httplib::Client c("127.0.0.1", nlohmann::json::parse(read_all(ports))["http"].get<int>());
  const auto r =
      c.Get("/v2/dype/admin/devices", httplib::Headers{{"Authorization", "Bearer s3cret"}});
  if (!r || r->status != 200) {
    ADD_FAILURE() << "GET /v2/dype/admin/devices: " << (r ? r->body : "no answer");
    return nullptr;
  }
  return nlohmann::json::parse(r->body);
}

TEST(DevicePlanningIds, ProfiledStoreIsFoundByItsIdAndSaidToBeUsed) {
  const fs::path dir = dype::test::process_temp_dir("dype_planning_ids");
  const fs::path stores = dir / "perfmodels", token = dir / "token", ports = dir / "ports.json", log = dir / "serve.log";
  fs::remove_all(stores);
  std::ofstream(token) << "s3cret\n";
  const std::string system = kSrc + "/configs/systems/paper-testbed-pcie4.yaml";
  const auto run = dype::test::run_cli(kProfile, "run --system " + system + " --device gpu0 --kernels gemm --budget 5s --out " +
                                                     stores.string() + "/");
  ASSERT_EQ(run.status, 0) << run.out;
  const fs::path store = stores / "amd-mi210.json";  // the emulated MI210's profile id, not a file name we chose
  ASSERT_TRUE(fs::exists(store)) << run.out;

  dype::test::Children children;
  const pid_t pid = spawn_serve({"--system", system, "--builtin-models", "--no-warmup", "--perfmodels", stores.string(),
                                 "--admin-token-file", token.string(), "--http-port", "0", "--grpc-port", "-1",
                                 "--metrics-port", "-1"},
                                log, ports);
  children.pids.push_back(pid);
  const nlohmann::json devices = admin_devices(ports, log);
  ASSERT_FALSE(devices.is_null());
  const nlohmann::json gpu = device(devices, "gpu0");
  ASSERT_TRUE(gpu.contains("planning")) << devices.dump(1);
  EXPECT_EQ(gpu["planning"]["planned"], true);
  EXPECT_EQ(gpu["planning"]["kernel_times"]["gemm"], "fitted (" + store.string() + ")") << gpu.dump(1);
  EXPECT_EQ(gpu["planning"]["kernel_times"]["spmm"], "device model (emulated amd-mi210)") << gpu.dump(1);
  EXPECT_NE(gpu["planning"]["profile"].get<std::string>().find("amd-mi210 (file "), std::string::npos);
  EXPECT_EQ(device(devices, "fpga0")["planning"]["planned"], true) << devices.dump(1);
  EXPECT_EQ(device(devices, "cpu0")["planning"]["why_not"], "schedulable: false in the system file");
  EXPECT_EQ(devices["transfers"]["mode"], "serial");
  EXPECT_EQ(devices["transfers"]["why"], "stated in " + system);
  EXPECT_EQ(children.stop(pid), 0);
  const std::string out = read_all(log);
  EXPECT_NE(out.find("gpu0: planned; profile amd-mi210 (file "), std::string::npos) << out;
  EXPECT_NE(out.find("gemm from fitted (" + store.string() + ")"), std::string::npos) << out;
}

TEST(DevicePlanningIds, BareDaemonSaysWhatTheDetectedHostIsPlannedWith) {
  const fs::path dir = dype::test::process_temp_dir("dype_planning_bare");
  const fs::path token = dir / "token", ports = dir / "ports.json", log = dir / "serve.log";
  std::ofstream(token) << "s3cret\n";
  dype::test::Children children;
  const pid_t pid = spawn_serve({"--builtin-models", "--no-warmup", "--admin-token-file", token.string(), "--http-port",
                                 "0", "--grpc-port", "-1", "--metrics-port", "-1"},
                                log, ports);
  children.pids.push_back(pid);
  const nlohmann::json devices = admin_devices(ports, log);
  ASSERT_FALSE(devices.is_null());
  const nlohmann::json cpu = device(devices, "cpu0");
  EXPECT_EQ(cpu["planning"]["planned"], true) << devices.dump(1);
  EXPECT_NE(cpu["planning"]["profile"].get<std::string>().find("generic-cpu"), std::string::npos);
  // Any GPU found here is planned too (a machine with one runs this test as well).
  for (const auto& d : devices["devices"]) {
    if (d["kind"] == "gpu") {
      EXPECT_EQ(d["planning"]["planned"], true) << d.dump(1);
    }
  }
  EXPECT_FALSE(devices["transfers"]["why"].get<std::string>().empty());
  EXPECT_EQ(children.stop(pid), 0);
  EXPECT_NE(read_all(log).find("cpu0: planned"), std::string::npos) << read_all(log);
}

}  // namespace
