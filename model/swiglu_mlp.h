// SwiGLU MLP (Llama/fla): y = W_down (silu(W_gate x) ⊙ W_up x); W_gate, W_up: [F, D], W_down: [D, F],
// no biases. forward keeps the two projections W_gate x, W_up x in ctx.activations; the product
// h = silu(·) ⊙ · is a temporary, recomputed by backward (elementwise, for W_down's gradient).
// backward takes x again, overwrites dx and accumulates the weight gradients, with its temporaries
// in ctx.scratch.
// Under tensor parallelism each rank holds hidden units tp.split(F): gate and up split on their
// outputs, down on its inputs, so y is this rank's term of a sum over the group (Block sums it)
// and so is dx.
#pragma once
#include <string>

#include "model/linear.h"
#include "model/tensor_parallel.h"

namespace linea {

class SwiGLUMLP {
 public:
  SwiGLUMLP(ParameterSet& params, const std::string& name, int64_t dim, int64_t hidden, const TensorParallel& tp = {});

  void init(Rng& rng, double std);
  Tensor forward(StepContext& ctx, const Tensor& x);
  // x: the forward's input.
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx);

 private:
  ShardRange units_;  // the hidden units this rank holds
  Linear gate_proj_, up_proj_, down_proj_;
  Tensor gate_, up_;
};

}  // namespace linea
