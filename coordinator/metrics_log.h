// MetricsLog: what a trainer wrote to RUN_DIR/metrics.jsonl — one JSON object per logged step with
// "step" (integer) and, when logged, "loss", "tokens_per_s", "tokens" (trained on so far),
// "val_loss" (eval steps), "step_time_s";
// the trainer's last line on success carries "finished": true. After a resume the trainer logs again
// the steps it had logged after its last checkpoint; the later line for a step wins. Lines without
// "step" (other kinds of records) are skipped; a last line without its newline (being written) is
// ignored; any other unreadable line is a std::runtime_error naming file and line.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace linea::coordinator {

struct MetricsPoint {
  int64_t step = 0;
  double loss = 0;          // NaN when not logged
  double tokens_per_s = 0;  // NaN when not logged
  std::optional<double> val_loss;
  std::optional<double> step_time_s;
  std::optional<double> tokens;

  // step_time_s, else the step's tokens (tokens / step) over tokens_per_s.
  std::optional<double> iteration_time_s() const;
};

struct MetricsLog {
  std::vector<MetricsPoint> points;  // one per step, ascending
  bool finished = false;
};

// A missing file is an empty log.
MetricsLog read_metrics_log(const std::string& path);

}  // namespace linea::coordinator
