#include "coordinator/loss_comparison.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace linea::coordinator {

LossComparison compare_losses(const MetricsLog& reference, const MetricsLog& run, double relative_tolerance,
                              const std::string& reference_name, const std::string& run_name) {
  if (!(relative_tolerance >= 0)) {
    throw std::invalid_argument("compare_losses: relative tolerance must be >= 0, got " +
                                std::to_string(relative_tolerance));
  }
  const std::string pair = run_name + " against " + reference_name;
  if (reference.points.empty()) throw std::runtime_error(pair + ": " + reference_name + " logged no steps");
  const size_t common = std::min(reference.points.size(), run.points.size());
  for (size_t i = 0; i <= common; ++i) {
    const bool ref_ended = i == reference.points.size(), run_ended = i == run.points.size();
    if (ref_ended && run_ended) break;
    if (ref_ended || run_ended || reference.points[i].step != run.points[i].step) {
      const auto where = [&](const MetricsLog& log, const std::string& name) {
        return i < log.points.size() ? name + " logged step " + std::to_string(log.points[i].step)
                                     : name + " logged no more steps";
      };
      throw std::runtime_error(pair + ": the runs logged different steps: at line " + std::to_string(i + 1) + ", " +
                               where(reference, reference_name) + ", " + where(run, run_name));
    }
  }
  LossComparison c;
  c.max_rel_diff = -1;
  for (size_t i = 0; i < reference.points.size(); ++i) {
    const MetricsPoint& r = reference.points[i];
    const MetricsPoint& x = run.points[i];
    if (!std::isfinite(r.loss) || !std::isfinite(x.loss)) {
      throw std::runtime_error(pair + ": step " + std::to_string(r.step) + " has no finite loss (" + reference_name +
                               ": " + std::to_string(r.loss) + ", " + run_name + ": " + std::to_string(x.loss) + ")");
    }
    const double diff = std::abs(x.loss - r.loss);
    const double rel = diff / std::max(std::abs(r.loss), 1e-30);
    c.max_abs_diff = std::max(c.max_abs_diff, diff);
    if (rel > c.max_rel_diff) {
      c.max_rel_diff = rel;
      c.worst_step = r.step;
    }
    c.final_loss = x.loss;
    c.final_abs_diff = diff;
    ++c.steps;
  }
  c.pass = c.max_rel_diff <= relative_tolerance;
  return c;
}

}  // namespace linea::coordinator
