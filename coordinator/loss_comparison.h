// compare_losses: one run's training loss, step by step, against a reference run's (their
// metrics.jsonl, read by coordinator/metrics_log.h). Made for runs that should follow one trajectory:
// the same model, data, seed and global batch under another parallel layout, or stopped under one
// layout and resumed under another. Both logs must hold the same steps, each with a finite loss;
// otherwise std::runtime_error naming the two runs and the first step that differs. The verdict:
// |loss_run − loss_ref| ≤ relative_tolerance · |loss_ref| at every step.
#pragma once
#include <cstdint>
#include <string>

#include "coordinator/metrics_log.h"

namespace linea::coordinator {

struct LossComparison {
  int64_t steps = 0;          // steps compared
  double max_abs_diff = 0;    // max over the steps of |loss_run − loss_ref|
  double max_rel_diff = 0;    // max over the steps of |loss_run − loss_ref| / |loss_ref|
  int64_t worst_step = 0;     // the step of max_rel_diff
  double final_loss = 0;      // the run's loss at its last step
  double final_abs_diff = 0;  // |loss_run − loss_ref| at the last step
  bool pass = false;          // max_rel_diff ≤ the tolerance
};

// `reference_name` and `run_name` only label the errors.
LossComparison compare_losses(const MetricsLog& reference, const MetricsLog& run, double relative_tolerance,
                              const std::string& reference_name, const std::string& run_name);

}  // namespace linea::coordinator
