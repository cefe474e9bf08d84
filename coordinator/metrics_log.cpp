#include "coordinator/metrics_log.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "coordinator/json_fields.h"

namespace linea::coordinator {

std::optional<double> MetricsPoint::iteration_time_s() const {
  if (step_time_s) return step_time_s;
  if (tokens && step > 0 && std::isfinite(tokens_per_s) && tokens_per_s > 0)
    return *tokens / static_cast<double>(step) / tokens_per_s;
  return std::nullopt;
}

MetricsLog read_metrics_log(const std::string& path) {
  MetricsLog log;
  std::ifstream in(path, std::ios::binary);
  if (!in) return log;
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<int64_t, MetricsPoint> by_step;
  size_t begin = 0;
  for (size_t line = 1; begin < content.size(); ++line) {
    const size_t end = content.find('\n', begin);
    if (end == std::string::npos) break;  // still being written
    const auto first = content.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = content.begin() + static_cast<std::ptrdiff_t>(end);
    begin = end + 1;
    if (std::all_of(first, last, [](char c) { return c == ' ' || c == '\t' || c == '\r'; })) continue;
    const nlohmann::json record = nlohmann::json::parse(first, last, nullptr, false);
    const std::string where = path + ":" + std::to_string(line);
    if (record.is_discarded() || !record.is_object())
      throw std::runtime_error(where + ": expected one JSON object per line");
    try {
      const JsonFields f(record, where);
      if (f.boolean("finished", false)) log.finished = true;
      if (!f.has("step")) continue;
      MetricsPoint p;
      p.step = f.required_integer("step", 0, std::numeric_limits<int64_t>::max());
      constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
      p.loss = f.optional_number("loss").value_or(kNaN);
      p.tokens_per_s = f.optional_number("tokens_per_s").value_or(kNaN);
      p.val_loss = f.optional_number("val_loss");
      p.step_time_s = f.optional_number("step_time_s");
      p.tokens = f.optional_number("tokens");
      by_step[p.step] = p;
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
  }
  for (auto& [step, p] : by_step) log.points.push_back(p);
  return log;
}

}  // namespace linea::coordinator
