#include "worker/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace linea {

LrSchedule::LrSchedule(const OptimizerConfig& config, int64_t total_steps)
    : kind_(config.schedule),
      peak_(config.lr),
      floor_(config.lr * config.lr_min_ratio),
      warmup_(config.warmup_steps),
      total_(total_steps),
      decay_steps_(0) {
  validate(config);
  if (total_steps < 1) {
    throw std::invalid_argument("schedule: total steps must be >= 1, got " + std::to_string(total_steps));
  }
  if (warmup_ > total_) {
    throw std::invalid_argument("optimizer.warmup_steps: expected at most the run's " + std::to_string(total_) +
                                " steps, got " + std::to_string(warmup_));
  }
  if (kind_ == LrScheduleKind::wsd) {
    decay_steps_ = std::llround(config.wsd_decay_ratio * static_cast<double>(total_));
    if (warmup_ + decay_steps_ > total_) {
      throw std::invalid_argument("optimizer.wsd_decay_ratio: warmup (" + std::to_string(warmup_) + ") plus " +
                                  std::to_string(decay_steps_) + " decay steps exceed the run's " +
                                  std::to_string(total_) + " steps");
    }
  }
}

double LrSchedule::at(int64_t step) const {
  if (step < 0) throw std::invalid_argument("LrSchedule::at: step must be >= 0, got " + std::to_string(step));
  if (step < warmup_) return peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  switch (kind_) {
    case LrScheduleKind::warmup_cosine: {
      if (total_ == warmup_) return peak_;  // no steps left to decay over
      const double p = std::min(1.0, static_cast<double>(step - warmup_ + 1) / static_cast<double>(total_ - warmup_));
      return floor_ + (peak_ - floor_) * 0.5 * (1 + std::cos(std::numbers::pi * p));
    }
    case LrScheduleKind::constant: return peak_;
    case LrScheduleKind::wsd: {
      const int64_t decay_start = total_ - decay_steps_;
      if (step < decay_start) return peak_;
      const double p = std::min(1.0, static_cast<double>(step - decay_start + 1) / static_cast<double>(decay_steps_));
      return peak_ - (peak_ - floor_) * p;
    }
  }
  return peak_;
}

}  // namespace linea
