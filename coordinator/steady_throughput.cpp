#include "coordinator/steady_throughput.h"

#include <stdexcept>

namespace linea::coordinator {

SteadyThroughput steady_throughput(const MetricsLog& log, int64_t warmup_steps, const std::string& run_name) {
  if (warmup_steps < 0) {
    throw std::invalid_argument("steady_throughput: warm-up steps must be >= 0, got " + std::to_string(warmup_steps));
  }
  SteadyThroughput t;
  for (const MetricsPoint& p : log.points) {
    if (p.step <= warmup_steps || !p.tokens) continue;
    const std::optional<double> seconds = p.iteration_time_s();
    if (!seconds) continue;
    t.tokens += *p.tokens / static_cast<double>(p.step);  // the trainer trains the same tokens every step
    t.seconds += *seconds;
    ++t.steps;
  }
  if (t.steps == 0 || !(t.seconds > 0)) {
    throw std::runtime_error(
        run_name + ": no logged step after the " + std::to_string(warmup_steps) +
        " warm-up steps has a step time and a token count (logged steps: " + std::to_string(log.points.size()) + ")");
  }
  t.tokens_per_s = t.tokens / t.seconds;
  t.mean_step_s = t.seconds / static_cast<double>(t.steps);
  return t;
}

}  // namespace linea::coordinator
