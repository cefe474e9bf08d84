// Trains a run config's text in this process (linea::train, its log discarded) with run.dir set to
// `dir`, expects the run to complete, and returns DIR/RUN_NAME/metrics.jsonl's lines; and the mean
// loss over some of them. For the CPU training tests.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/json_lines.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea::testing {

inline std::vector<nlohmann::json> train_metrics(const std::string& text, const std::filesystem::path& dir,
                                                 const std::string& run_name) {
  const RunConfig config = parse_run_config(text, run_name + ".toml", {"run.dir=" + dir.string()});
  std::ostringstream log;
  const TrainSummary summary = train(config, log);
  EXPECT_TRUE(summary.complete);
  return json_lines(dir / run_name / "metrics.jsonl");
}

// The mean loss of metrics lines [begin, end).
inline double mean_loss(const std::vector<nlohmann::json>& lines, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += lines[i]["loss"].get<double>();
  return sum / double(end - begin);
}

}  // namespace linea::testing
