// The training state in checkpoints, under any TP × DP layout of ranks.
//
// Each rank saves its part (training_checkpoint_part): its blocks of the weights, "model/<parameter>"
// (DistributedOptimizer::owned_weights), and of the optimizer state, "optimizer/<buffer>/<parameter>"
// (owned_state) — over all ranks every tensor exactly once — and, for the manifest, the step,
// tokens seen, resolved config, loader position, optimizer kind and step count, and the layout.
// resume_training() has every rank read back the blocks it holds (its whole weights and the
// optimizer state it keeps) from whichever files hold them, so a checkpoint written as tp × dp
// resumes as any tp' × dp' (checkpoint/checkpoint.h assembles the blocks). The state read is the
// same bits that were saved.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "data/training_batches.h"
#include "parallel/communicator.h"
#include "worker/distributed_optimizer.h"
#include "worker/run_config.h"

namespace linea {

CheckpointState training_checkpoint_part(const RunConfig& config, int64_t step, int64_t tokens,
                                         const DistributedOptimizer& optimizer, const data::TrainingBatches& batches,
                                         const CheckpointLayout& layout);

struct ResumedTraining {
  int64_t step = 0;
  int64_t tokens = 0;
  std::string config;  // the resolved configuration it was written with
  CheckpointLayout layout;
  std::filesystem::path directory;
};

// Collective over `world` (every rank of the job): restores the weights, the optimizer state and
// step count, and the data position from the newest committed checkpoint under `root` that every
// rank can read. A checkpoint that some rank finds damaged is skipped on every rank (a warning on
// `log`) in favour of the previous one. A checkpoint that does not fit this run (another optimizer,
// missing tensors or other shapes: a changed model config) is an error on every rank (AgreedError;
// with one rank, std::runtime_error). `resumed` is empty when no checkpoint could be read; then
// `state_overwritten` says whether a damaged one was partly read into the weights and optimizer
// state, which must then be initialised afresh (the same on every rank). `damaged` lists the
// committed checkpoints skipped, newest first.
// New cross-layer routing parameters (model/routing.h) missing from the checkpoint are an error
// naming model.routing.resume_unrouted, unless `resume_unrouted`: then they (weights and optimizer
// state) keep the values they have (their initial ones: zero) and `unrouted` says so.
struct ResumeAttempt {
  std::optional<ResumedTraining> resumed;
  bool state_overwritten = false;
  std::vector<std::filesystem::path> damaged;
  bool unrouted = false;  // routing parameters started afresh
};
ResumeAttempt resume_training(const std::filesystem::path& root, Communicator& world, DistributedOptimizer& optimizer,
                              data::TrainingBatches& batches, std::ostream& log, bool resume_unrouted = false);

}  // namespace linea
