#pragma once
// A small SVG writer for predicted-vs-measured charts (log-log scatter with the y = x line and
// +-15% bands), one panel per kernel. No dependencies; the output opens in any browser.
#include <string>
#include <vector>

namespace dype::perf {

struct PlotPoint {
  double measured_s = 0;
  double predicted_s = 0;
  bool holdout = false;  // drawn differently: the points the fit never saw
};

struct PlotPanel {
  std::string title;      // "spmm  (MAPE 7.1% held-out, n=60)"
  std::vector<PlotPoint> points;
};

// The whole SVG document. `subtitle` carries provenance ("measured on ..." / "modelled").
std::string predicted_vs_measured_svg(const std::string& title, const std::string& subtitle,
                                      const std::vector<PlotPanel>& panels);

}  // namespace dype::perf
