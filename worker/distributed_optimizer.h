// DistributedOptimizer: the optimizer step of one data-parallel replica — gradients averaged over
// the DP group, global-norm clipping, the update (AdamW; or Muon for the matrices, AdamW for the
// rest) and the refresh of every replica's weights — with the work and the state split over the DP
// ranks by an OptimizerShardPlan (worker/optimizer_shard_plan.h).
//
//   zero = true (ZeRO-1): the gradients are reduce-scattered, so each rank receives the average of
//     its own pieces only; it keeps optimizer state for those pieces only and updates those pieces of
//     the f32 master weights (on the CPU the master weights are the parameters themselves; each rank
//     writes only its pieces of them); then the updated chunks are all-gathered into every replica.
//   zero = false: the gradients are all-reduced (DataParallelReducer); every rank keeps the AdamW
//     state of every non-matrix parameter and updates all of them, identically.
//   Muon's matrices, in both modes: each one is updated whole by its owner rank (the plan spreads
//     the Newton–Schulz work greedily), which alone keeps its momentum; the owners' matrices are
//     then all-gathered (with zero = true, as part of the chunks).
// With one DP rank this is the plain optimizer: no communication and no copies.
//
// Devices: the parameters and the DP communicator share one device. On a GPU (f32 master weights
// and gradients there, an NCCL communicator) the optimizer state, the chunks and every update stay
// on the GPU (kernels/cuda/optimizer_math.h, newton_schulz.h); only the gradient norm's partial
// sums come to the host. The TP communicator works on the parameters' device too (NCCL on a GPU).
// The checkpoint blocks below are then views of device memory.
//
// Tensor parallelism (model/tensor_parallel.h): each TP rank runs its own DP group over its shards
// (the TP ranks of a group hold the same parameters, so the plans agree on the owners). A Muon
// matrix split over TP is gathered whole over the TP group by the owner's TP ranks (an all-gather
// on the parameters' device, then one strided copy per rank into place, whichever dimension is
// split; model/parameter_shard.h), orthogonalised whole (on each of them), and each keeps its
// slice; the update's scale uses the full shape. The
// gradient norm adds the shards' sums over TP and counts replicated parameters once. In
// checkpoints a shard is the block of the full tensor it holds, and a parameter replicated over TP
// is written by TP rank 0 only.
//
// Numerics. Each element sees exactly the arithmetic of AdamW / Muon (worker/adamw.h, muon.h) on the
// DP-averaged gradient, and the MPI backend's reductions are deterministic and the same for
// reduce_scatter and all_reduce, so: ZeRO on and off give bit-identical weights; any number of
// ranks fed the same averaged gradient give the bits of AdamW / Muon on one rank. The gradient norm
// is Σ over ranks (in rank order) of Σ over each rank's pieces (in plan order) of a blocked f64 sum
// of squares, computed that way in both modes, so clipping agrees bit for bit too.
//
// Checkpoints: state is described in full-tensor terms (CheckpointTensor blocks named like
// OptimizerState's tensors: "adamw.m/<p>", "adamw.v/<p>", "muon.momentum/<p>"), so that any layout can
// read what any other wrote: owned_state() is what this rank writes (each element of each state
// tensor written by exactly one rank), held_state() what it keeps and must be given back on resume.
// Likewise owned_weights() are the blocks of the parameters this rank writes.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "model/parameters.h"
#include "model/tensor_parallel.h"
#include "parallel/communicator.h"
#include "worker/data_parallel_reducer.h"
#include "worker/muon.h"
#include "worker/optimizer_config.h"
#include "worker/optimizer_shard_plan.h"

namespace linea {

class DistributedOptimizer {
 public:
  // `params` (finalized; f32 or f64 on the CPU, f32 on a GPU) must outlive the optimizer; `dp` is the data-parallel
  // group (every rank of it constructs the optimizer alike); `tp` the tensor-parallel group the model
  // was built with. Throws std::invalid_argument on a bad config or, for Muon, a matrix that is not 2-D.
  DistributedOptimizer(const OptimizerConfig& config, ParameterSet& params, Communicator& dp, bool zero,
                       TensorParallel tp = {});

  OptimizerKind kind() const { return config_.kind; }
  bool zero() const { return zero_; }
  const OptimizerShardPlan& plan() const { return plan_; }
  int64_t step_count() const { return step_; }

  // Collective over DP (and TP), after backward: averages the gradients over the DP ranks and
  // returns the global L2 norm of the logical gradients. When config.grad_clip > 0 and the norm
  // exceeds it, the next step() updates from the gradients scaled by grad_clip / (norm + 1e-6), each
  // rounded as ops::scale rounds it (a non-finite norm scales nothing); the scaling happens inside
  // the update, so the gradient buffers keep the unscaled average and no pass over them is spent on
  // it. With zero = true only this rank's pieces of the averaged gradient exist afterwards (not in
  // params.grads()).
  double reduce_gradients();
  // The factor the next step() applies to the gradients (1 when the last reduce_gradients() did not clip).
  double gradient_scale() const { return grad_scale_; }
  // Overlap of the averaging with backward (zero = false, more than one DP rank; otherwise these do
  // nothing): call overlap_next_backward() before the step's last micro-batch and route the model's
  // gradients_ready reports (Model::set_gradients_ready) to gradients_ready(); buckets of the
  // all-reduce then start as backward completes them (DataParallelReducer), and reduce_gradients()
  // finishes the rest. ZeRO's reduce-scatter runs over the packed chunks after backward.
  void overlap_next_backward();
  void gradients_ready(size_t first_param, size_t end_param);
  // Collective over DP (and TP, for Muon's sharded matrices): one update with learning rate lr from the reduced
  // gradients, after which every replica holds the same new weights.
  void step(double lr);

  // Blocks of state this rank writes into a checkpoint / keeps (views of its buffers).
  std::vector<CheckpointTensor> owned_state() const { return state_blocks(true); }
  std::vector<CheckpointTensor> held_state() const { return state_blocks(false); }
  // Blocks of the parameters (views of params.values()), named by parameter: those this rank
  // writes, and those it holds (every parameter whole, as this rank has it).
  std::vector<CheckpointTensor> owned_weights() const;
  std::vector<CheckpointTensor> held_weights() const;
  // After held_state() has been filled from a checkpoint: the number of steps taken.
  void set_step_count(int64_t steps);

 private:
  // A piece whose optimizer state this rank keeps.
  struct Held {
    ShardPiece piece;
    bool owned = false;                 // one of this rank's own pieces
    bool muon = false;                  // a whole matrix updated by Muon (otherwise AdamW)
    Tensor m, v;                        // AdamW state
    Tensor momentum;                    // Muon state
    std::vector<ShardRange> tp_ranges;  // a Muon matrix split over TP: every TP rank's part of it
  };

  bool sharded_gradients() const { return zero_ && dp_.size() > 1; }
  bool written_here(const ShardPiece& piece) const;  // false for TP-replicated parameters on TP ranks > 0
  Tensor piece_view(const Tensor& flat, const ShardPiece& piece) const;
  Tensor gradient(const ShardPiece& piece) const;  // where this rank's reduced gradient of the piece lives
  std::vector<CheckpointTensor> state_blocks(bool owned_only) const;
  CheckpointTensor block_of(const std::string& name, const Tensor& data, const ShardPiece& piece) const;
  // Copies rank r's pieces between the flat parameter buffer and its chunk of `chunks`: into the
  // chunk (pack) or from it (unpack).
  enum class PieceCopy { pack, unpack };
  void copy_pieces(PieceCopy direction, const Tensor& flat, int rank, const Tensor& chunks, int64_t chunk_numel,
                   bool whole_only) const;
  void update_matrix(Held& h, double lr);

  OptimizerConfig config_;
  double grad_scale_ = 1;  // the clip factor of the last reduce_gradients(), applied by step()
  ParameterSet& params_;
  Communicator& dp_;
  bool zero_;
  TensorParallel tp_;
  OptimizerShardPlan plan_;
  std::unique_ptr<DataParallelReducer> reducer_;  // zero = false
  std::vector<Held> held_;
  Tensor state_;     // every Held's m, v and momentum, back to back
  Tensor chunks_;    // R chunks of the plan: gradients to reduce-scatter, weights to all-gather
  Tensor received_;  // zero = true: this rank's reduced gradient chunk
  MuonScratch scratch_;
  Tensor tp_staging_, tp_full_;  // gathering TP-split Muon matrices (gather_full_into)
  int64_t step_ = 0;
};

}  // namespace linea
