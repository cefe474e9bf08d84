// Trainer: one training job on this process, end to end. It opens the data (the embedded default
// corpus when data.path = "default", built on first use), builds and initialises the model,
// resumes from the newest committed checkpoint of run.dir/run.name/checkpoints (train.resume),
// then runs optimizer steps: micro-batches with gradient accumulation, clipping, the schedule's
// learning rate, the optimizer. It logs metrics.jsonl, evaluates on the val split, writes
// checkpoints in the background, shows a progress line, and stops after train.stop_at (or
// train.steps), or early on SIGINT/SIGTERM (see stop_signal.h), checkpointing before it returns.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <limits>

#include "worker/run_config.h"

namespace linea {

struct TrainSummary {
  int64_t start_step = 0;  // the step the run resumed from (0 for a fresh run)
  int64_t end_step = 0;    // the last step completed
  int64_t tokens = 0;      // tokens trained on, over the whole run
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  double last_val_loss = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0;                // wall time of this invocation's steps
  double tokens_per_s = 0;           // over this invocation's steps
  double checkpoint_blocked_ms = 0;  // longest time a step waited on a checkpoint save
  double checkpoint_write_ms = 0;    // background time of the last checkpoint write
  int64_t checkpoint_bytes = 0;      // tensor bytes in the last checkpoint
  int stop_signal = 0;               // the signal that stopped the run early, or 0
  bool complete = false;             // reached train.steps
};

// Runs the job; progress and the summary go to `out` (stderr in the CLI). Throws on bad
// configuration, data or checkpoints, with the file and key or dataset named.
TrainSummary train(const RunConfig& config, std::ostream& out);

}  // namespace linea
