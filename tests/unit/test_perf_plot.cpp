// Plots through matplotlib (perfmodel/plot.h): the data a predicted-against-measured plot draws,
// and the runner's errors, each naming what is missing, when a script cannot draw.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../test_temp_dir.h"
#include "common/error.h"
#include "perfmodel/plot.h"

namespace dype::perf {
namespace {

namespace fs = std::filesystem;

std::string error_of(const fs::path& script, const std::vector<std::string>& args = {}) {
  try {
    run_plot_script(script, args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PerfPlot, DataHoldsEveryPanelAndPoint) {
  const std::vector<PlotPanel> panels = {{"spmm", {{1e-4, 1.1e-4, false}, {2e-3, 1.9e-3, true}}},
                                         {"gemm", {}}};
  const nlohmann::json d = predicted_vs_measured_data("models: cpu", "times measured", panels);
  EXPECT_EQ(d["title"], "models: cpu");
  EXPECT_EQ(d["subtitle"], "times measured");
  ASSERT_EQ(d["panels"].size(), 2u);
  EXPECT_EQ(d["panels"][0]["title"], "spmm");
  ASSERT_EQ(d["panels"][0]["points"].size(), 2u);
  EXPECT_EQ(d["panels"][0]["points"][1]["measured_s"], 2e-3);
  EXPECT_EQ(d["panels"][0]["points"][1]["predicted_s"], 1.9e-3);
  EXPECT_EQ(d["panels"][0]["points"][1]["holdout"], true);
  EXPECT_TRUE(d["panels"][1]["points"].empty());

  const fs::path file = test::process_temp_dir("perf_plot") / "p.plot.json";
  write_plot_data(d, file);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(file)), d);
  EXPECT_THROW(write_plot_data(d, "/no/such/folder/p.plot.json"), Error);
}

TEST(PerfPlot, TheRunnerSaysWhatIsMissing) {
  const fs::path dir = test::process_temp_dir("perf_plot_run");
  EXPECT_NE(
      error_of(dir / "nosuch.py").find("no plotting script at " + (dir / "nosuch.py").string()),
      std::string::npos);
  // The scripts exit 3 when `import matplotlib` fails.
  std::ofstream(dir / "no_mpl.py") << "import sys\nsys.exit(3)\n";
  EXPECT_NE(error_of(dir / "no_mpl.py")
                .find("has no matplotlib (install python3-matplotlib: scripts/setup.sh)"),
            std::string::npos);
  std::ofstream(dir / "fails.py") << "import sys\nsys.exit(5)\n";
  EXPECT_NE(error_of(dir / "fails.py").find("fails.py failed (exit status 5)"), std::string::npos);
  // Arguments reach the script as given, spaces included.
  std::ofstream(dir / "touch.py") << "import sys\nopen(sys.argv[1], 'w').write(sys.argv[2])\n";
  const fs::path out = dir / "out file.txt";
  EXPECT_EQ(error_of(dir / "touch.py", {out.string(), "a b"}), "");
  std::string text;
  std::getline(std::ifstream(out), text);
  EXPECT_EQ(text, "a b");
}

}  // namespace
}  // namespace dype::perf
