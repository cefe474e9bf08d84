// A line chart as a standalone SVG document (no plotting dependency): one polyline per series, axes
// with "nice" ticks (1, 2, 5 × 10^k), a legend, and a title. Points whose y is not finite are
// skipped (they break the line). The y range leaves out the first 5% of the x range (the loss at
// initialization would otherwise flatten the interesting part); lines beyond it are clipped.
#pragma once
#include <string>
#include <vector>

namespace linea::coordinator {

struct PlotSeries {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
};

struct PlotLabels {
  std::string title;
  std::string x_label;
  std::string y_label;
};

std::string render_line_plot(const PlotLabels& labels, const std::vector<PlotSeries>& series);

// About `target` round tick values covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace linea::coordinator
