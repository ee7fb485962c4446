#pragma once
// Plots through matplotlib: every plot dype draws is a PNG drawn by a Python script in scripts/
// from a data file the C++ writes beside it (the data stays, to re-plot or read). One plotting
// library for every figure, and no drawing code in C++.
//
//   const auto data = perf::predicted_vs_measured_data(title, subtitle, panels);
//   perf::write_plot_data(data, "cpu.plot.json");
//   perf::run_plot_script(std::string(DYPE_SOURCE_DIR) + "/scripts/plot_perfmodel.py",
//                         {"cpu.plot.json", "cpu.png"});
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dype::perf {

struct PlotPoint {
  double measured_s = 0;
  double predicted_s = 0;
  bool holdout = false;  // drawn differently: the points the fit never saw
};

struct PlotPanel {
  std::string title;  // "spmm  (MAPE 7.1% held-out, n=60)"
  std::vector<PlotPoint> points;
};

// What scripts/plot_perfmodel.py draws: one log-log panel per kernel, predicted against measured
// with the y = x line and +-15% bands. `subtitle` carries provenance ("measured on ..." /
// "modelled").
nlohmann::json predicted_vs_measured_data(const std::string& title, const std::string& subtitle,
                                          const std::vector<PlotPanel>& panels);

// Writes `data` as JSON to `path`; Error when it cannot.
void write_plot_data(const nlohmann::json& data, const std::filesystem::path& path);

// Runs `script` with `args` under Debian's /usr/bin/python3 (where python3-matplotlib is installed;
// python3 from PATH when there is none) and waits. Error, saying what to install, when the script
// is missing, python3 cannot be run, matplotlib is not installed (the scripts exit 3 then), or the
// script fails.
void run_plot_script(const std::filesystem::path& script, const std::vector<std::string>& args);

}  // namespace dype::perf
