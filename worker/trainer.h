// Trainer: one training job on this process, end to end. It opens the data (the embedded default
// corpus when data.path = "default", built on first use), builds and initialises the model,
// resumes from the newest committed checkpoint of run.dir/run.name/checkpoints (train.resume),
// then runs optimizer steps: micro-batches with gradient accumulation, clipping, the schedule's
// learning rate, the optimizer. It logs metrics.jsonl, evaluates on the val split, writes
// checkpoints in the background, shows a progress line, and stops after train.stop_at (or
// train.steps), or early on SIGINT/SIGTERM (see stop_signal.h), checkpointing before it returns.
//
// Under MPI (every rank of `options.world` calls train() with the same config): the ranks form a
// ProcessGrid of [parallel] tp × dp; each DP replica trains on its share of every global batch
// (the TP ranks of a replica read the same data), gradients are averaged over DP and the optimizer
// is distributed (worker/distributed_optimizer.h, ZeRO-1 unless optimizer.zero = false), so any
// layout follows the one-rank trajectory to fp32 rounding. Rank 0 alone writes config.toml,
// metrics.jsonl and the progress; the loss it logs is the DP average. Every rank writes its part of
// each checkpoint, and a run resumes under any layout. OpenMP threads: train.threads, else
// OMP_NUM_THREADS, else max(1, cores / ranks on this node) (no more than this rank's CPU affinity).
// Errors: a problem one rank meets (data, checkpoint, a bad step) becomes the same AgreedError on
// every rank at the next point where they meet; a rank that stops answering makes the others throw
// CommunicationTimeout after parallel.timeout_s. Neither leaves a rank waiting forever.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

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
  int64_t checkpoint_bytes = 0;      // tensor bytes this rank wrote in the last checkpoint
  int stop_signal = 0;               // the signal that stopped the run early, or 0
  bool complete = false;             // reached train.steps
  std::string device = "cpu";        // where it trained
  std::string precision = "f32";     // of activations and compute weights
  int64_t peak_device_bytes = 0;     // most GPU memory held at once (what linea allocated; 0 on the cpu)
};

struct TrainOptions {
  MPI_Comm world = MPI_COMM_WORLD;  // the ranks of this job, when MPI is running
  // Called on every rank after each step with that step's metrics (what rank 0 logs); an exception
  // it throws fails the run on every rank like any other error.
  std::function<void(const nlohmann::json& metrics)> on_step;
};

// Runs the job; progress goes to `out` (stderr in the CLI; rank 0 only). Throws on bad
// configuration, data or checkpoints, with the file and key or dataset named.
TrainSummary train(const RunConfig& config, std::ostream& out, const TrainOptions& options = {});

}  // namespace linea
