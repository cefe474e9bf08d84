// LrSchedule: the learning rate of each optimizer step (0-based) of a run of `total_steps` steps,
// from the peak config.lr, config.warmup_steps = W, lr_min = config.lr_min_ratio · lr, and the kind:
//   warmup (all kinds), step s < W:    lr · (s + 1) / W
//   warmup_cosine, W ≤ s:              lr_min + (lr − lr_min) · (1 + cos(π·p)) / 2,
//                                      p = min(1, (s − W + 1) / (total_steps − W))
//   constant, W ≤ s:                   lr
//   wsd (D = round(wsd_decay_ratio · total_steps) decay steps), W ≤ s < total − D: lr;
//                                      s ≥ total − D: lr − (lr − lr_min) · min(1, (s − (total − D) + 1) / D)
// so the last warmup step reaches lr and the last step of the run (total_steps − 1) reaches lr_min.
#pragma once
#include <cstdint>

#include "worker/optimizer_config.h"

namespace linea {

class LrSchedule {
 public:
  // Throws std::invalid_argument naming the field when the config does not fit total_steps.
  LrSchedule(const OptimizerConfig& config, int64_t total_steps);
  double at(int64_t step) const;  // step >= 0; steps past the end keep the last value
  double peak() const { return peak_; }
  double floor() const { return floor_; }

 private:
  LrScheduleKind kind_;
  double peak_, floor_;
  int64_t warmup_, total_, decay_steps_;
};

}  // namespace linea
