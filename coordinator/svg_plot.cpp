#include "coordinator/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace linea::coordinator {
namespace {

constexpr double kWidth = 960, kHeight = 540;
constexpr double kLeft = 80, kRight = 260, kTop = 50, kBottom = 60;  // margins; the legend sits on the right
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  const double scale = std::pow(10.0, std::abs(exponent));  // exact for the exponents plots meet
  // Tick k is k·m units of 10^exponent; dividing by a power of ten (rather than multiplying by its
  // inexact inverse) makes 2.2 come out as the double nearest 2.2.
  auto at = [&](double units) { return exponent >= 0 ? units * scale : units / scale; };
  double m = 10;
  for (double candidate : {1.0, 2.0, 5.0, 10.0}) {
    if (at(candidate) >= raw) {
      m = candidate;
      break;
    }
  }
  std::vector<double> ticks;
  for (double k = std::ceil(lo / at(m)); at(k * m) <= hi + at(m) * 1e-9; ++k) ticks.push_back(at(k * m) + 0.0);
  return ticks;
}

std::string render_line_plot(const PlotLabels& labels, const std::vector<PlotSeries>& series) {
  Range xr, yr;
  for (const PlotSeries& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) xr.add(s.x[i]);
  if (xr.empty()) xr = {0, 1};
  const double x_skip = xr.lo + 0.05 * (xr.hi - xr.lo);
  for (int pass = 0; pass < 2 && yr.empty(); ++pass)
    for (const PlotSeries& s : series)
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && (pass == 1 || s.x[i] >= x_skip)) yr.add(s.y[i]);
  if (yr.empty()) yr = {0, 1};
  if (xr.hi == xr.lo) xr.hi = xr.lo + 1;
  if (yr.hi == yr.lo) yr = {yr.lo - 0.5, yr.hi + 0.5};
  const double pad = 0.04 * (yr.hi - yr.lo);
  yr = {yr.lo - pad, yr.hi + pad};

  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * plot_w; };
  auto py = [&](double y) { return kTop + (yr.hi - y) / (yr.hi - yr.lo) * plot_h; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<defs><clipPath id=\"plot\"><rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w
      << "\" height=\"" << plot_h << "\"/></clipPath></defs>\n"
      << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
      << xml_escape(labels.title) << "</text>\n";
  for (double t : nice_ticks(xr.lo, xr.hi, 8)) {
    svg << "<line x1=\"" << px(t) << "\" y1=\"" << kTop << "\" x2=\"" << px(t) << "\" y2=\"" << kTop + plot_h
        << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << px(t) << "\" y=\"" << kTop + plot_h + 18
        << "\" text-anchor=\"middle\">" << number(t) << "</text>\n";
  }
  for (double t : nice_ticks(yr.lo, yr.hi, 6)) {
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << py(t) << "\" x2=\"" << kLeft + plot_w << "\" y2=\"" << py(t)
        << "\" stroke=\"#e5e5e5\"/>\n<text x=\"" << kLeft - 8 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">"
        << number(t) << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\"" << plot_h
      << "\" fill=\"none\" stroke=\"black\"/>\n"
      << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 15 << "\" text-anchor=\"middle\">"
      << xml_escape(labels.x_label) << "</text>\n"
      << "<text transform=\"translate(20 " << kTop + plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
      << xml_escape(labels.y_label) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& s = series[k];
    const char* color = kColors[k % std::size(kColors)];
    svg << "<g clip-path=\"url(#plot)\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\">\n";
    std::string points;
    auto flush = [&] {
      if (!points.empty()) svg << "<polyline points=\"" << points << "\"/>\n";
      points.clear();
    };
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        flush();
        continue;
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(s.x[i]), py(s.y[i]));
      points += buf;
    }
    flush();
    svg << "</g>\n";
    const double ly = kTop + 10 + 18 * static_cast<double>(k);
    svg << "<line x1=\"" << kLeft + plot_w + 15 << "\" y1=\"" << ly << "\" x2=\"" << kLeft + plot_w + 40 << "\" y2=\""
        << ly << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n<text x=\"" << kLeft + plot_w + 46 << "\" y=\""
        << ly + 4 << "\">" << xml_escape(s.label) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace linea::coordinator
