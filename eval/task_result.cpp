#include "eval/task_result.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace linea::eval {

MetricValue& Metrics::operator[](const std::string& name) {
  const auto it = std::find_if(items_.begin(), items_.end(), [&](const auto& item) { return item.first == name; });
  return it != items_.end() ? it->second : items_.emplace_back(name, MetricValue{}).second;
}

const MetricValue& Metrics::at(const std::string& name) const {
  const auto it = std::find_if(items_.begin(), items_.end(), [&](const auto& item) { return item.first == name; });
  if (it == items_.end()) throw std::out_of_range("no metric \"" + name + "\"");
  return it->second;
}

nlohmann::json TaskResult::to_json() const {
  nlohmann::json j = {{"task", task}, {"samples", samples}};
  if (context_length > 0) j["context_length"] = context_length;
  for (const auto& [name, m] : metrics) {
    j[name] = m.value;
    j[name + "_stderr"] = m.stderr_;
  }
  return j;
}

MetricValue mean_with_stderr(std::span<const double> values) {
  const double n = double(values.size());
  if (values.empty()) return {};
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / n;
  if (values.size() < 2) return {mean, 0};
  double squares = 0;  // Σ (v − mean)²
  for (double v : values) squares += (v - mean) * (v - mean);
  return {mean, std::sqrt(squares / (n - 1) / n)};
}

}  // namespace linea::eval
