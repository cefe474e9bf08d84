// lm_head_loss: the LM head and cross-entropy at the top of Model, over a whole head or over a
// vocabulary-parallel one (each TP rank holds rows [head.shard_offset, …) of it).
//
// Returns Σ_n (logsumexp(x_n · Wᵀ) − x_n · W[target_n]) over the rows whose target is not −1, the
// same on every TP rank and equal (to rounding) to the value without TP. When dx is defined, also
// dx = loss_scale · ∂Σ/∂x (overwritten; whole and identical on every rank) and dweight +=
// loss_scale · ∂Σ/∂(this rank's rows of W).
// Without TP this is ops::lm_head_cross_entropy. With TP (collective over the group):
// lm_head_shard_statistics on each rank, one all-gather of the [2, N] statistics,
// lm_head_combine_statistics (the log-sum-exp over the whole vocabulary), then
// lm_head_shard_backward (which recomputes the shard's logits rather than keeping N × V/R of them)
// and an all-reduce of dx. Temporaries go to ctx.scratch; the statistics are f32 in bf16 steps.
// On CUDA the statistics move over an NCCL communicator (tp.comm on the model's device).
#pragma once
#include "model/parameters.h"
#include "model/step_context.h"
#include "model/tensor_parallel.h"

namespace linea {

double lm_head_loss(StepContext& ctx, const TensorParallel& tp, const Tensor& x, const Parameter& head,
                    const Tensor& targets, double loss_scale, Tensor dx, Tensor dweight);

}  // namespace linea
