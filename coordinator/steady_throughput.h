// steady_throughput: a run's training speed after its warm-up steps, from its metrics.jsonl
// (coordinator/metrics_log.h): the tokens of the logged steps after `warmup_steps` over the sum of
// their step times (each step's tokens / its tokens_per_s, or its step_time_s), so one slow step
// weighs as much as its time. Steps are the run's own; a resumed run's first steps count as warm-up
// only if they are within `warmup_steps` of step 0. Throws std::runtime_error when no logged step
// after the warm-up has a step time and a token count.
#pragma once
#include <cstdint>
#include <string>

#include "coordinator/metrics_log.h"

namespace linea::coordinator {

struct SteadyThroughput {
  int64_t steps = 0;        // steps measured
  double tokens = 0;        // their tokens (all ranks)
  double seconds = 0;       // their summed step times
  double tokens_per_s = 0;  // tokens / seconds
  double mean_step_s = 0;   // seconds / steps
};

SteadyThroughput steady_throughput(const MetricsLog& log, int64_t warmup_steps, const std::string& run_name);

}  // namespace linea::coordinator
