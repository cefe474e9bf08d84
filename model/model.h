// Model: a decoder-only LM, embedding → blocks → final RMSNorm → LM head + cross-entropy (fused,
// ops::lm_head_cross_entropy), with a hand-written backward through every module.
//
// Parameters live in one ParameterSet (f32 to train, f64 for finite-difference tests), named
// embedding.weight, layers.{i}.{attn_norm,mixer.*,mlp_norm,mlp.*}, norm.weight, head.weight
// (absent with tied embeddings). A step's tensors live in two Arenas sized by the first step:
// `activations`, what forward keeps for backward, and `scratch`, the temporaries of one block's
// forward or backward (reset after each; what a backward needs of them it recomputes, see Block).
// A micro-batch is N packed tokens: ids and targets are i32 [N] host tensors; a target of −1 is
// ignored; `seqs` says where documents begin (conv, attention, recurrent state and RoPE restart there).
//
// Device and precision: the parameters, activations and arithmetic live on `device`. On CUDA the
// ids, targets and RoPE positions are checked on the host and uploaded once per micro-batch (one
// copy each); the model itself synchronises with the host only there and at the loss readback (the
// CUDA ops add their own: index checks of embedding, RoPE and the LM head, sequence-layout uploads).
// With compute dtype bf16 (CUDA only) the master weights and gradients stay f32 (ParameterSet's
// mixed precision): activations and compute weights are bf16, statistics (rstd, lse) and the decay
// gate f32, and each block's bf16 parameter gradients are added into the f32 gradients as soon as
// its backward ends (before the gradients-ready hook hears of them). After changing
// params().values() (optimizer step, resume) call params().refresh_compute_values().
//
// Tensor parallelism (model/tensor_parallel.h): a Model built with TensorParallel{comm, rank, R}
// is this rank's part of the model; the R ranks of the group call every method together, with the
// same ids, targets and seqs. Parameters keep their TP = 1 names; each records which part of its
// logical tensor it holds (Parameter::full_shape, shard_dim, shard_offset). init_parameters gives
// the same logical tensors as at TP = 1 for the same seed; forward_backward returns the same loss
// on every rank (that of the TP = 1 model, to rounding) and accumulates into each rank's gradient
// buffer the gradients of what it holds: complete for its shards, and complete and identical on
// every rank for replicated parameters.
//
// Cross-layer routing (config.routing, model/routing.h): the model gives every layer its part and
// owns the links between CLER's layers; on the CPU and on CUDA alike.
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/arena.h"
#include "model/block.h"
#include "model/embedding.h"
#include "model/model_config.h"
#include "model/partial_gradient_sum.h"
#include "model/routing.h"
#include "model/tensor_parallel.h"

namespace linea {

class Model {
 public:
  // With allocate = false the parameters are only declared (names, shapes, roles: enough to count
  // them) and no memory is allocated; such a model cannot run. A layout the TP size does not divide
  // (heads, kv heads) throws std::invalid_argument naming the config key, on every rank alike.
  // dtype: of the master weights (f32 or f64); compute_dtype: of activations and compute weights
  // (default dtype; bf16 needs device = cuda).
  Model(const ModelConfig& config, DType dtype = DType::f32, bool allocate = true, TensorParallel tp = {},
        Device device = Device::cpu, std::optional<DType> compute_dtype = std::nullopt);

  const ModelConfig& config() const { return config_; }
  const TensorParallel& tensor_parallel() const { return tp_; }
  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }

  // fla's init: every projection, conv and the embedding (and untied head) N(0, init_std); norms 1;
  // biases 0; A_log = log U(0,16) (GDN) or log U(1,16) (KDA, GDN-2); dt_bias = softplus⁻¹(dt),
  // dt = exp(U(log 1e-3, log 1e-1)) ≥ 1e-4. Deterministic in `seed` (same values for f32 and f64).
  void init_parameters(uint64_t seed);

  // Returns the mean cross-entropy over the non-ignored targets and ACCUMULATES
  // loss_scale · ∂(mean)/∂θ into params().grads() (a micro-batch with no target adds nothing and
  // returns 0).
  double forward_backward(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs, double loss_scale = 1.0);
  // Called by forward_backward, as backward goes, with ranges [first_param, end_param) of
  // params().params() whose gradients this backward has finished: the head's, then each block's
  // (last first), then the rest (embedding, final norm) at the end. With tensor-parallel partial
  // gradients (Parameter::partial_grad) everything is reported once, at the end. For overlapping
  // the data-parallel reduction (DataParallelReducer); empty: no calls.
  using GradientsReady = std::function<void(size_t first_param, size_t end_param)>;
  void set_gradients_ready(GradientsReady ready) { gradients_ready_ = std::move(ready); }

  // The same mean loss, forward only; gradients untouched.
  double evaluate(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs);

  // Inference: the logits x_r · Wᵀ of the final norm's output at rows `rows` (indices into the N
  // tokens of one full forward of ids over seqs): f32 [rows.size(), vocab] on the host (f64 for
  // f64 models). Gradients untouched. Whole-vocabulary heads only (no tensor parallelism).
  Tensor logits(const Tensor& ids, const SeqLayout& seqs, const std::vector<int64_t>& rows);

  // Decoding (inference/decoder.h builds on these): one state per layer (MixerState) for
  // `sequences` sequences, each empty (nothing seen yet); and the logits of `rows` of a forward of
  // ids over seqs where sequence s of seqs continues sequence s of `state` (prefill: the prompts
  // from empty states; decode: one token per sequence), updating the state. RoPE positions
  // (ctx.positions) count from the sequence's first token. The result equals
  // that of one full forward over each whole sequence. The states live on the model's device; on CUDA
  // a step of one token per sequence runs each family's one-token kernels (docs/inference.md).
  struct DecodingState {
    std::vector<std::unique_ptr<MixerState>> layers;
    std::vector<int64_t> seen;  // tokens seen of each sequence (RoPE positions continue from there)
    size_t bytes() const;
  };
  DecodingState start_decoding(int64_t sequences) const;
  Tensor logits_continuing(const Tensor& ids, const SeqLayout& seqs, DecodingState& state,
                           const std::vector<int64_t>& rows);

  Device device() const { return params_.device(); }

  // Runs fn with the step arenas set aside: the passes fn makes (logits, decoding, evaluate) take
  // arenas of their own, freed when fn returns (or throws), so that the training step's arenas keep
  // their blocks and high water (evaluation during training: larger batches, decoding).
  void with_separate_arenas(const std::function<void()>& fn);

  // Bytes of activations the largest step so far needed: kept for backward, temporaries, and both.
  size_t saved_activation_bytes() const { return activations_.high_water_bytes(); }
  size_t scratch_bytes() const { return scratch_.high_water_bytes(); }
  size_t activation_bytes() const { return saved_activation_bytes() + scratch_bytes(); }

 private:
  // Runs embedding → blocks; returns the last block's output [N, D] (the final norm's input) and
  // the number of targets that count.
  // Also sets device_targets to the targets on the model's device.
  Tensor forward(StepContext& ctx, const Tensor& ids, const Tensor& targets, int64_t& target_count,
                 Tensor& device_targets);
  StepContext begin_step(const SeqLayout& seqs);
  // Embedding → blocks without a backward to follow (logits, decoding): run_block(block, ctx, x)
  // runs one block; only the running residual is kept between blocks (unless CLER links carry a
  // write error to a later block). Returns the last block's output.
  Tensor forward_only(StepContext& ctx, const Tensor& ids,
                      const std::function<Tensor(Block&, StepContext&, const Tensor&)>& run_block);
  const Parameter& head() const;
  // Checks ids (i32 [N] host, in the vocabulary); returns them on the model's device.
  Tensor checked_ids(StepContext& ctx, const Tensor& ids) const;
  // final norm → head on rows `rows` of the last block's output.
  Tensor head_logits(StepContext& ctx, const Tensor& residual, const std::vector<int64_t>& rows);

  ModelConfig config_;
  TensorParallel tp_;
  ParameterSet params_;
  Embedding embedding_;
  std::vector<Block> blocks_;
  RMSNorm norm_;
  Parameter* head_ = nullptr;          // untied LM head
  std::vector<LayerRouting> routing_;  // one per layer
  std::deque<WriteErrorLink> links_;   // CLER's, one per sending layer (stable addresses)
  PartialGradientSum partial_grads_;
  std::vector<size_t> block_params_;  // block i's parameters: [block_params_[i], block_params_[i + 1])
  GradientsReady gradients_ready_;
  Arena activations_, scratch_;
};

}  // namespace linea
