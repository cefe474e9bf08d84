#include "model/swiglu_mlp.h"

#include "kernels/ops.h"

namespace linea {

SwiGLUMLP::SwiGLUMLP(ParameterSet& params, const std::string& name, int64_t dim, int64_t hidden,
                     const TensorParallel& tp)
    : units_(tp.split(hidden, "model.mlp_hidden")),
      gate_proj_(params, name + ".gate_proj", dim, hidden, false, ParamRole::matrix, LinearSplit::outputs, units_),
      up_proj_(params, name + ".up_proj", dim, hidden, false, ParamRole::matrix, LinearSplit::outputs, units_),
      down_proj_(params, name + ".down_proj", hidden, dim, false, ParamRole::matrix, LinearSplit::inputs, units_) {}

void SwiGLUMLP::init(Rng& rng, double std) {
  gate_proj_.init(rng, std);
  up_proj_.init(rng, std);
  down_proj_.init(rng, std);
}

Tensor SwiGLUMLP::forward(StepContext& ctx, const Tensor& x) {
  gate_ = gate_proj_.forward(ctx, x);
  up_ = up_proj_.forward(ctx, x);
  Tensor h = ctx.temporary({x.dim(0), units_.size});
  ops::swiglu_forward(h, gate_, up_);
  return down_proj_.forward(ctx, h);
}

void SwiGLUMLP::backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) {
  const int64_t n = dy.dim(0);
  // dh = dy · W_down first; the SwiGLU backward then writes h = silu(gate) ⊙ up over dh (the
  // forward's product, recomputed in the same pass) for W_down's weight gradient.
  Tensor dh = ctx.temporary({n, units_.size});
  down_proj_.backward_input(dy, dh, false);
  Tensor dgate = ctx.temporary({n, units_.size});
  Tensor dup = ctx.temporary({n, units_.size});
  const Tensor h = dh;
  ops::swiglu_backward_with_product(dgate, dup, h, dh, gate_, up_);
  down_proj_.backward_parameters(h, dy);
  gate_proj_.backward(x, dgate, dx, false);
  up_proj_.backward(x, dup, dx, true);
}

}  // namespace linea
