// Mixer: the token-mixing half of a block (softmax attention or a delta-rule layer), x: [N, D] →
// y: [N, D]. forward keeps what backward needs in ctx.activations, except its input x: backward
// takes x again (Block recomputes it), overwrites dx with ∂L/∂x given dy = ∂L/∂y and accumulates
// its parameters' gradients.
#pragma once
#include "kernels/random.h"
#include "model/step_context.h"

namespace linea {

class Mixer {
 public:
  virtual ~Mixer() = default;
  // fla's init: projection and conv weights N(0, std), biases 0, norms 1, gate parameters per layer.
  virtual void init(Rng& rng, double std) = 0;
  virtual Tensor forward(StepContext& ctx, const Tensor& x) = 0;
  virtual void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) = 0;
};

}  // namespace linea
