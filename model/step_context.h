// StepContext: what every module's forward and backward share during one micro-batch.
//
// `activations` holds what each module's backward needs (and the block outputs); it is reset at
// the start of a step, so kept tensors stay valid until the next forward. `scratch` holds the
// temporaries of one block's forward or backward (Model resets it after each): what a backward
// needs of them it recomputes. Both arenas live on the
// model's device. `seqs` (on the host) says where the packed documents begin (conv, attention and
// the delta rule never cross a boundary); `positions` (i32 [N], on the device) is each token's
// position inside its document, for RoPE.
//
// Element types: `dtype` is that of activations and compute weights (f32 or bf16 to train, f64 in
// tests); `master_dtype` that of the master weights (f32 or f64), in which the decay gate runs (the
// delta rule takes its log decay g in f32 at least); statistics saved for backward (rstd, lse) are
// f32 in bf16 steps and `dtype` otherwise.
//
// `backward_follows`: this forward is a training step's, and its backward runs next; a forward
// alone (validation, evaluation, logits) leaves it false, so that no module keeps for a backward
// what it could otherwise recompute (the delta rule's saved chunk intermediates).
#pragma once
#include <optional>

#include "kernels/arena.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea {

struct StepContext {
  // Validates `seqs` and allocates `positions` in `activations` (so make it after a reset).
  // master_dtype defaults to dtype.
  StepContext(Arena& activations, Arena& scratch, const SeqLayout& seqs, DType dtype,
              std::optional<DType> master_dtype = std::nullopt);

  Arena& activations;
  Arena& scratch;
  const SeqLayout& seqs;
  Tensor positions;
  DType dtype;
  DType master_dtype;
  bool backward_follows = false;

  int64_t tokens() const { return seqs.num_tokens(); }
  DType statistics_dtype() const { return dtype == DType::bf16 ? DType::f32 : dtype; }
  Tensor activation(Shape shape) { return activations.alloc(std::move(shape), dtype); }
  Tensor temporary(Shape shape) { return scratch.alloc(std::move(shape), dtype); }
  Tensor statistics(Shape shape) { return activations.alloc(std::move(shape), statistics_dtype()); }
};

}  // namespace linea
