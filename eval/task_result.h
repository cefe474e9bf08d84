// TaskResult: what one evaluation task reports: its name (lm-eval's or RULER's), the context
// length for the synthetic tasks, the number of samples, and named metrics with their standard
// errors (the standard error of the mean over samples, lm-eval's `mean_stderr`: sample standard
// deviation (n − 1 in the denominator) / √n; 0 for a single sample). The metrics keep the order
// the task reports them in, its headline metric first (the printed line's first metric).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace linea::eval {

struct MetricValue {
  double value = 0;
  double stderr_ = 0;
};

class Metrics {
 public:
  MetricValue& operator[](const std::string& name);      // appended when new
  const MetricValue& at(const std::string& name) const;  // std::out_of_range when absent
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, MetricValue>> items_;
};

struct TaskResult {
  std::string task;
  int64_t context_length = 0;  // 0: not a synthetic task at a set length
  int64_t samples = 0;
  Metrics metrics;

  // {"task", "samples", ["context_length"], "METRIC", "METRIC_stderr", ...}
  nlohmann::json to_json() const;
};

// The mean of per-sample values and its standard error.
MetricValue mean_with_stderr(std::span<const double> values);

}  // namespace linea::eval
