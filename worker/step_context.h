// StepContext: what every module's forward and backward share during one micro-batch.
//
// `activations` holds each module's outputs and whatever its backward needs; it is reset at the
// start of a step, so saved tensors stay valid until the next forward. `scratch` holds the
// temporaries of a backward and may be reset after each block's backward. `seqs` says where the
// packed documents begin (conv, attention and the delta rule never cross a boundary);
// `positions` (i32 [N]) is each token's position inside its document, for RoPE.
#pragma once
#include "kernels/arena.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea {

struct StepContext {
  // Validates `seqs` and allocates `positions` in `activations` (so make it after a reset).
  StepContext(Arena& activations, Arena& scratch, const SeqLayout& seqs, DType dtype);

  Arena& activations;
  Arena& scratch;
  const SeqLayout& seqs;
  Tensor positions;
  DType dtype;  // of activations and parameters (f32 to train, f64 in tests)

  int64_t tokens() const { return seqs.num_tokens(); }
  Tensor activation(Shape shape) { return activations.alloc(std::move(shape), dtype); }
  Tensor temporary(Shape shape) { return scratch.alloc(std::move(shape), dtype); }
};

}  // namespace linea
