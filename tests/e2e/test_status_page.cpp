// The status page (GET /ui/, GET /v2/dype/status) against dype-serve as an operator runs it: its
// files and its token, then the page itself in Debian's headless Chromium while dype-client streams
// a drifting workload: the plan, the devices and a drift re-plan appear in the page's DOM after its
// JS ran, the page records no JS error, and its screenshot is not blank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "../test_run_cli.h"
#include "../test_serve_process.h"
#include "../test_temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dype::test::read_all;
using json = nlohmann::json;

const std::string kSrc = DYPE_SOURCE_DIR;
const std::string kClientExe = std::string(DYPE_BINARY_DIR) + "/apps/dype-client";

// Debian's chromium package installs /usr/bin/chromium (scripts/setup.sh); other names as found.
std::string find_chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (fs::exists(p)) return p;
  return "";
}

int http_port(const fs::path& ports) { return json::parse(read_all(ports))["http"].get<int>(); }

// The daemon's status once `model` has re-planned on drift (at most `timeout_s`), else null. The
// re-plan may keep the plan (its predicted gain under the hysteresis): the page shows it either way.
json wait_for_drift_replan(httplib::Client& http, const std::string& model, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto r = http.Get("/v2/dype/status"); r && r->status == 200) {
      const json s = json::parse(r->body);
      for (const json& m : s["models"])
        if (m["model"] == model)
          for (const json& rp : m["replans"])
            if (rp["cause"] == "drift") return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return nullptr;
}

TEST(StatusPage, FilesOpenAndDataBehindTheUiToken) {
  const fs::path dir = dype::test::process_temp_dir("dype_status_token");
  const fs::path ports = dir / "ports.json", log = dir / "serve.log", token = dir / "ui.token";
  std::ofstream(token) << "look-but-do-not-touch\n";
  dype::test::Children children;
  const pid_t pid = dype::test::spawn_serve({"--system", kSrc + "/configs/systems/paper-testbed-pcie4.yaml",
                                             "--builtin-models", "--no-warmup", "--http-port", "0", "--grpc-port",
                                             "-1", "--metrics-port", "-1", "--ui-token-file", token.string()},
                                            log, ports);
  children.pids.push_back(pid);
  ASSERT_TRUE(fs::exists(ports)) << read_all(log);
  httplib::Client http("127.0.0.1", http_port(ports));

  auto root = http.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 302);
  EXPECT_EQ(root->get_header_value("Location"), "/ui/");
  auto page = http.Get("/ui/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script src=\"uPlot.iife.min.js\"></script>"), std::string::npos);
  // The vendored chart library, as npm published it (its banner names it and its licence).
  auto lib = http.Get("/ui/uPlot.iife.min.js");
  ASSERT_TRUE(lib);
  EXPECT_EQ(lib->status, 200);
  EXPECT_EQ(lib->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(lib->body.find("uPlot"), std::string::npos);
  EXPECT_GT(lib->body.size(), 20000u);
  auto missing = http.Get("/ui/../etc/passwd");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  auto refused = http.Get("/v2/dype/status");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401) << refused->body;
  EXPECT_NE(refused->body.find("status page token"), std::string::npos) << refused->body;
  auto wrong = http.Get("/v2/dype/status", {{"Authorization", "Bearer look-but-touch"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto ok = http.Get("/v2/dype/status", {{"Authorization", "Bearer look-but-do-not-touch"}});
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  const json s = json::parse(ok->body);
  EXPECT_EQ(s["mode"], "perf");
  ASSERT_FALSE(s["devices"].empty());
  for (const json& d : s["devices"]) {
    EXPECT_TRUE(d.contains("kind") && d.contains("product") && d.contains("planning")) << d.dump();
    EXPECT_TRUE(d["planning"].contains("planned")) << d.dump();
  }
  // The built-in models and the example repository's (models/), each with its plan.
  std::set<std::string> names;
  for (const json& m : s["models"]) names.insert(m["model"].get<std::string>());
  for (const char* m : {"gcn", "gin", "swin-transformer", "karate-gcn"}) EXPECT_TRUE(names.count(m)) << m;
  for (const json& m : s["models"]) {
    EXPECT_FALSE(m["label"].get<std::string>().empty());
    EXPECT_FALSE(m["stages"].empty());
    // The drift detector's thresholds as configured (runtime/planning/drift.h's defaults).
    EXPECT_DOUBLE_EQ(m["drift"]["threshold"].get<double>(), 0.05);
    EXPECT_DOUBLE_EQ(m["drift"]["stage_time_threshold"].get<double>(), 0.25);
    EXPECT_EQ(m["replans"][0]["cause"], "initial");
    // Each model's Pareto front for its current workload, its plan among them.
    const json& p = s["pareto"][m["model"].get<std::string>()];
    EXPECT_FALSE(p["plans"].empty()) << p.dump();
  }
  EXPECT_EQ(children.stop(pid), 0) << read_all(log);
}

TEST(StatusPage, BrowserShowsPlanDevicesAndADriftReplan) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "no chromium (Debian's chromium package: scripts/setup.sh installs it)";

  const fs::path dir = dype::test::process_temp_dir("dype_status_browser");
  const fs::path ports = dir / "ports.json", log = dir / "serve.log";
  dype::test::Children children;
  const pid_t pid = dype::test::spawn_serve({"--system", kSrc + "/configs/systems/paper-testbed-pcie4.yaml",
                                             "--builtin-models", "--no-warmup", "--mode", "balanced", "--http-port",
                                             "0", "--grpc-port", "-1", "--metrics-port", "-1"},
                                            log, ports);
  children.pids.push_back(pid);
  ASSERT_TRUE(fs::exists(ports)) << read_all(log);
  const int port = http_port(ports);
  httplib::Client http("127.0.0.1", port);

  // The demo's transformer drift: 256 tokens (window 16), then 8192 (window 512) from request 20;
  // the window attention moves to the FPGAs' SWAT image and the model re-plans on the data alone.
  // The stream goes on while the browser looks.
  dype::test::CliResult stream;
  std::thread client([&] {
    stream = dype::test::run_cli(kClientExe, "--http-port " + std::to_string(port) +
                                                 " stream --model swin-transformer --requests 80 --concurrency 2"
                                                 " --drift 0:256x16,20:8192x512");
  });
  const json status = wait_for_drift_replan(http, "swin-transformer", 90);
  if (status.is_null()) {
    client.join();
    FAIL() << "swin-transformer never re-planned on drift:\n" << stream.out << "\n" << read_all(log);
  }

  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/ui/";
  // Chromium runs as root in CI containers: without its sandbox (the page is the daemon's own).
  const std::string flags = "--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                            "--user-data-dir=" + (dir / "profile").string() +
                            " --window-size=1400,2000 --virtual-time-budget=6000 --enable-logging=stderr --v=0";
  const auto t0 = std::chrono::steady_clock::now();
  const auto dom = dype::test::run_cli(chromium, flags + " --dump-dom " + url);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "chromium --dump-dom of the status page took " << load_s << " s (measured)\n";
  ASSERT_EQ(dom.status, 0) << dom.out;
  const std::string& html = dom.out;
  // The page polled and drew: devices, the transformer's plan as stages on device lanes, the
  // charts, and the drift re-plan in its timeline.
  EXPECT_NE(html.find("data-polls=\""), std::string::npos) << html;
  for (const json& d : status["devices"])
    EXPECT_NE(html.find("data-device=\"" + d["name"].get<std::string>() + "\""), std::string::npos) << d["name"];
  EXPECT_NE(html.find("data-model=\"swin-transformer\""), std::string::npos);
  EXPECT_NE(html.find("class=\"stage "), std::string::npos);
  EXPECT_NE(html.find("data-cause=\"drift\" data-swapped=\""), std::string::npos) << html;
  EXPECT_NE(html.find("<canvas"), std::string::npos) << "no uPlot chart drawn";
  EXPECT_NE(html.find("data-watch=\"seq_len\""), std::string::npos) << "no drift signals";
  // No JS error: the page keeps every error and console.error in #page-errors, and Chromium's
  // log shows no uncaught exception.
  EXPECT_NE(html.find("id=\"page-errors\" class=\"errors\" data-count=\"0\" hidden"), std::string::npos) << html;
  EXPECT_EQ(html.find("Uncaught"), std::string::npos) << html;

  const fs::path png = dir / "status-page.png";
  const auto shot = dype::test::run_cli(chromium, flags + " --screenshot=" + png.string() + " " + url);
  ASSERT_EQ(shot.status, 0) << shot.out;
  ASSERT_TRUE(fs::exists(png)) << shot.out;
  EXPECT_EQ(shot.out.find("Uncaught"), std::string::npos) << shot.out;
  const auto colours = dype::test::run_cli("python3", kSrc + "/tests/scripts/png_colours.py " + png.string());
  ASSERT_EQ(colours.status, 0) << colours.out;
  std::cout << "screenshot: " << colours.out;
  int n = 0;
  double top = 1.0;
  ASSERT_EQ(std::sscanf(colours.out.c_str(), "%*dx%*d colours=%d top_share=%lf", &n, &top), 2) << colours.out;
  EXPECT_GT(n, 64) << "a blank or nearly blank page: " << colours.out;
  EXPECT_LT(top, 0.95) << colours.out;

  client.join();
  EXPECT_EQ(stream.status, 0) << stream.out;
  EXPECT_EQ(children.stop(pid), 0) << read_all(log);
}

}  // namespace
