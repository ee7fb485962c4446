#include "perfmodel/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace dype::perf {
namespace {

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string time_label(double s) {
  if (s >= 1) return fmt("%gs", s);
  if (s >= 1e-3) return fmt("%gms", s * 1e3);
  if (s >= 1e-6) return fmt("%gus", s * 1e6);
  return fmt("%gns", s * 1e9);
}

}  // namespace

std::string predicted_vs_measured_svg(const std::string& title, const std::string& subtitle,
                                      const std::vector<PlotPanel>& panels) {
  constexpr double kPanel = 360, kPad = 60, kTop = 70;
  const double width = std::max<double>(1, static_cast<double>(panels.size())) * (kPanel + kPad) + kPad;
  const double height = kTop + kPanel + kPad + 30;
  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", kPad) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" +
         esc(title) + "</text>\n";
  svg += "<text x=\"" + fmt("%.0f", kPad) + "\" y=\"44\" fill=\"#555\">" + esc(subtitle) + "</text>\n";
  for (std::size_t pi = 0; pi < panels.size(); ++pi) {
    const PlotPanel& panel = panels[pi];
    const double x0 = kPad + static_cast<double>(pi) * (kPanel + kPad);
    const double y0 = kTop;
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const auto& p : panel.points) {
      for (double v : {p.measured_s, p.predicted_s}) {
        if (v > 0 && std::isfinite(v)) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    }
    if (!(hi > 0)) {
      lo = 1e-6;
      hi = 1;
    }
    const double llo = std::floor(std::log10(lo)), lhi = std::max(llo + 1, std::ceil(std::log10(hi)));
    auto px = [&](double v) { return x0 + (std::log10(v) - llo) / (lhi - llo) * kPanel; };
    auto py = [&](double v) { return y0 + kPanel - (std::log10(v) - llo) / (lhi - llo) * kPanel; };
    svg += "<g>\n<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", y0) + "\" width=\"" +
           fmt("%.0f", kPanel) + "\" height=\"" + fmt("%.0f", kPanel) +
           "\" fill=\"none\" stroke=\"#333\"/>\n";
    // Decade grid and labels.
    for (double e = llo; e <= lhi + 1e-9; e += 1) {
      const double v = std::pow(10.0, e);
      svg += "<line x1=\"" + fmt("%.1f", px(v)) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" +
             fmt("%.1f", px(v)) + "\" y2=\"" + fmt("%.1f", y0 + kPanel) + "\" stroke=\"#eee\"/>\n";
      svg += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", py(v)) + "\" x2=\"" +
             fmt("%.1f", x0 + kPanel) + "\" y2=\"" + fmt("%.1f", py(v)) + "\" stroke=\"#eee\"/>\n";
      svg += "<text x=\"" + fmt("%.1f", px(v)) + "\" y=\"" + fmt("%.1f", y0 + kPanel + 16) +
             "\" text-anchor=\"middle\" fill=\"#555\">" + time_label(v) + "</text>\n";
      svg += "<text x=\"" + fmt("%.1f", x0 - 4) + "\" y=\"" + fmt("%.1f", py(v) + 4) +
             "\" text-anchor=\"end\" fill=\"#555\">" + time_label(v) + "</text>\n";
    }
    // y = x and +-15% band.
    const double a = std::pow(10.0, llo), b = std::pow(10.0, lhi);
    svg += "<line x1=\"" + fmt("%.1f", px(a)) + "\" y1=\"" + fmt("%.1f", py(a)) + "\" x2=\"" +
           fmt("%.1f", px(b)) + "\" y2=\"" + fmt("%.1f", py(b)) + "\" stroke=\"#999\"/>\n";
    for (double f : {1.15, 1 / 1.15}) {
      svg += "<line x1=\"" + fmt("%.1f", px(a)) + "\" y1=\"" + fmt("%.1f", py(std::max(a, a * f))) +
             "\" x2=\"" + fmt("%.1f", px(std::min(b, b / f))) + "\" y2=\"" +
             fmt("%.1f", py(std::min(b, b / f) * f)) +
             "\" stroke=\"#bbb\" stroke-dasharray=\"4 3\"/>\n";
    }
    for (const auto& p : panel.points) {
      if (!(p.measured_s > 0 && p.predicted_s > 0)) continue;
      svg += "<circle cx=\"" + fmt("%.1f", px(p.measured_s)) + "\" cy=\"" +
             fmt("%.1f", py(std::clamp(p.predicted_s, a, b))) + "\" r=\"3\" " +
             (p.holdout ? "fill=\"#d62728\" fill-opacity=\"0.9\"" : "fill=\"#1f77b4\" fill-opacity=\"0.45\"") +
             "/>\n";
    }
    svg += "<text x=\"" + fmt("%.1f", x0) + "\" y=\"" + fmt("%.1f", y0 - 8) + "\" font-weight=\"bold\">" +
           esc(panel.title) + "</text>\n";
    svg += "<text x=\"" + fmt("%.1f", x0 + kPanel / 2) + "\" y=\"" + fmt("%.1f", y0 + kPanel + 34) +
           "\" text-anchor=\"middle\">measured / device time</text>\n";
    svg += "<text transform=\"translate(" + fmt("%.1f", x0 - 46) + "," + fmt("%.1f", y0 + kPanel / 2) +
           ") rotate(-90)\" text-anchor=\"middle\">predicted</text>\n</g>\n";
  }
  svg += "<text x=\"" + fmt("%.0f", kPad) + "\" y=\"" + fmt("%.0f", height - 8) +
         "\" fill=\"#555\">blue: training points, red: held-out points; dashed: +-15%</text>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace dype::perf
